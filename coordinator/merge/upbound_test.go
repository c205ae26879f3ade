package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestCircuitOpenTimeBounded: a limiter whose circuit opens for 31 days
// (the longest circuit_open its configuration takes) reopened after each
// failed probe, doubling up to 64 times that: no upstream view says an
// open time past 372 days, the longest the module takes (it refuses the
// whole reply otherwise, and with it every reply naming the key).
func TestCircuitOpenTimeBounded(t *testing.T) {
	cfg := upCfg()
	cfg.Limiters[0].Upstream = &wire.UpstreamConfig{CircuitFailures: 1, CircuitOpen: wire.MaxPeriod}
	m, err := NewMerger(cfg, newMemStore(), MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now, seq := int64(1000e9), int64(0)
	apply := func(sg wire.Signal) wire.UpView {
		t.Helper()
		seq++
		rp, err := m.Apply(upBatch("x", seq, now, sg), now)
		if err != nil {
			t.Fatal(err)
		}
		return upViewOf(t, rp)
	}
	fail := wire.Signal{Limiter: "llm", Key: "k", Failures: 1}
	u := apply(fail)
	for range 8 { // each: the circuit half-open, x probes, the probe fails
		if u.Circuit != wire.CircuitOpen || u.Open <= 0 || u.Open > wire.MaxPeriod*12 {
			t.Fatalf("after %d batches: %+v, want open for at most 372 days", seq, u)
		}
		now += u.Open
		apply(wire.Signal{Limiter: "llm", Key: "k", Probe: true})
		u = apply(fail)
	}
}
