package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A cost that can never pass (RetryAfter -1: over a bucket's burst, over
// a window's limit) is denied and asks the coordinator for nothing: its
// demand would size a lease of the whole burst for this isolate, which a
// bucket charges as spent when it expires unreported, emptying the key
// for every isolate. A cost that fits later still asks.
func TestNeverFittingCostAsksNothing(t *testing.T) {
	for _, alg := range []string{wire.GCRA, wire.TokenBucket, wire.FixedWindow} {
		for _, mode := range []string{wire.Strict, wire.Auto} {
			c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
				{Name: "b", Algorithm: alg, Limit: 100, Period: 3600e9, Burst: 100, Mode: mode}}})
			if err != nil {
				t.Fatal(err)
			}
			var r Result
			now := int64(5e9)
			if err := c.Decide(0, []byte("k"), 1000, now, &r); err != nil || r.Allowed || r.RetryAfter != -1 {
				t.Fatalf("%s %s: cost 1000: %+v, %v; want denied for good", alg, mode, r, err)
			}
			out, err := c.SyncOut(now, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) > 0 {
				for _, d := range batchOf(t, out).Entries {
					if d.Key == "k" && (d.Demand > 0 || d.Delta > 0) {
						t.Errorf("%s %s: the batch asks %d for a cost that never fits", alg, mode, d.Demand)
					}
				}
			}
			// A cost within the burst asks, as before.
			if err := c.Decide(0, []byte("k"), 2, now+1e6, &r); err != nil || !r.SyncRetry {
				t.Fatalf("%s %s: cost 2: %+v, %v; want held for a lease", alg, mode, r, err)
			}
			if out, err = c.SyncOut(now+1e6, nil); err != nil {
				t.Fatal(err)
			}
			var demand int64
			if len(out) > 0 {
				for _, d := range batchOf(t, out).Entries {
					if d.Key == "k" {
						demand += d.Demand
					}
				}
			}
			if demand != 2 {
				t.Errorf("%s %s: a cost of 2 asks %d, want 2", alg, mode, demand)
			}
		}
	}
}

func batchOf(t *testing.T, out []byte) *wire.Batch {
	t.Helper()
	var b wire.Batch
	if err := b.UnmarshalMsg(out); err != nil {
		t.Fatal(err)
	}
	return &b
}
