package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

func upCfg() wire.Config {
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "llm", Algorithm: wire.FixedWindow, Limit: 10, Period: 1e9, Mode: wire.Approximate,
			Upstream: &wire.UpstreamConfig{CircuitFailures: 2, MaxPause: 60e9}}}}
}

func upBatch(iso string, seq, at int64, sigs ...wire.Signal) *wire.Batch {
	return &wire.Batch{Version: wire.Version, Isolate: iso, Seq: seq, At: at,
		Entries: []wire.Delta{{Limiter: "llm", Key: "k", Window: at / 1e9, Delta: 1, Demand: 1}}, Signals: sigs}
}

func upViewOf(t *testing.T, rp *wire.Reply) wire.UpView {
	t.Helper()
	for _, u := range rp.Upstream {
		if u.Key == "k" {
			return u
		}
	}
	t.Fatalf("no upstream view of k in %+v", rp)
	return wire.UpView{}
}

// The upstream state is merged (pause as the maximum, capped), agreed
// (limits from two isolates), survives a restart (it is in the key's
// record), keeps the key from expiring while it says something, and is
// dropped once over.
func TestUpstreamStateMergedAndDurable(t *testing.T) {
	dir := newMemStore() // the store a restart finds again
	store, err := reopenMemStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMerger(upCfg(), store, MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := int64(1000e9)
	sig := func(pause, fails, limit int64) wire.Signal {
		return wire.Signal{Limiter: "llm", Key: "k", Pause: pause, Failures: fails, Limit: limit}
	}
	if _, err := m.Apply(upBatch("a", 1, t0, sig(30e9, 0, 6)), t0); err != nil {
		t.Fatal(err)
	}
	// A shorter pause from another isolate does not shorten it; a day is capped at max_pause.
	rp, err := m.Apply(upBatch("b", 1, t0+1e9, sig(5e9, 0, 6)), t0+1e9)
	if err != nil {
		t.Fatal(err)
	}
	if u := upViewOf(t, rp); u.Pause != 29e9 || u.Limit != 6 {
		t.Fatalf("after two isolates: %+v, want the 30 s pause (29 s left) and the agreed limit 6", u)
	}
	rp, err = m.Apply(upBatch("c", 1, t0+2e9, sig(86400e9, 1, 0), sig(0, 1, 0)), t0+2e9)
	if err != nil {
		t.Fatal(err)
	}
	if u := upViewOf(t, rp); u.Pause != 60e9 || u.Circuit != wire.CircuitOpen || u.Open <= 0 {
		t.Fatalf("after a day's pause and two failures: %+v, want the 60 s cap and an open circuit", u)
	}
	if err := m.Commit(t0 + 2e9); err != nil {
		t.Fatal(err)
	}
	store.Close()

	store, err = reopenMemStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, err = NewMerger(upCfg(), store, MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rp, err = m.Apply(upBatch("d", 1, t0+3e9), t0+3e9)
	if err != nil {
		t.Fatal(err)
	}
	if u := upViewOf(t, rp); u.Pause != 59e9 || u.Limit != 6 {
		t.Fatalf("after a restart: %+v, want the pause (59 s left) and the agreed limit", u)
	}
	if err := m.Commit(t0 + 3e9); err != nil {
		t.Fatal(err)
	}
	ks, err := m.KeyState("llm", "k", t0+3e9)
	if err != nil {
		t.Fatal(err)
	}
	if u := ks.Upstream; u == nil || u.PausedNS != 59e9 || u.Circuit == "closed" || u.Announced != 6 || ks.Limit != 6 {
		t.Fatalf("admin view: %+v %+v", ks, ks.Upstream)
	}
	st, err := m.loadKey(m.lims["llm"], "k", nil, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	// While paused the key is not garbage (its windows are long over).
	if m.expired(st, t0+30e9) {
		t.Fatal("a paused key counts as expired")
	}
	// Long after, the pause is over and the reports are past their
	// horizon, but the circuit (half-open by now) stays until a probe
	// closes it.
	now := t0 + 120e9
	if m.expired(st, now) {
		t.Fatal("a key whose circuit is not closed counts as expired")
	}
	rp, err = m.Apply(&wire.Batch{Version: wire.Version, Isolate: "e", Seq: 1, At: now,
		Signals: []wire.Signal{{Limiter: "llm", Key: "k", Probe: true}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if u := upViewOf(t, rp); u.Circuit != wire.CircuitHalfOpen || !u.Probe {
		t.Fatalf("asking for the probe: %+v, want it granted", u)
	}
	rp, err = m.Apply(&wire.Batch{Version: wire.Version, Isolate: "f", Seq: 1, At: now,
		Signals: []wire.Signal{{Limiter: "llm", Key: "k", Probe: true}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if u := upViewOf(t, rp); u.Probe {
		t.Fatalf("a second isolate got the probe too: %+v", u)
	}
	rp, err = m.Apply(&wire.Batch{Version: wire.Version, Isolate: "e", Seq: 2, At: now + 1,
		Signals: []wire.Signal{{Limiter: "llm", Key: "k", Successes: 1}}}, now+1)
	if err != nil {
		t.Fatal(err)
	}
	if u := upViewOf(t, rp); u != (wire.UpView{Limiter: "llm", Key: "k"}) {
		t.Fatalf("after the probe's success: %+v, want nothing left", u)
	}
	if !m.expired(st, now+10e9) {
		t.Fatalf("once its upstream state is over the key is still live: %+v", st.up)
	}
}

// An upstream section survives encode and decode; a cut or corrupt one is
// an error, not a panic.
func TestUpstreamSectionRoundTrip(t *testing.T) {
	lim := &upCfg().Limiters[0]
	st := newKeyState(lim, keyStorageKey("llm", "k"))
	st.win, st.count = 7, 3
	st.up = &keyUpstream{pause: 99, circuit: wire.CircuitHalfOpen, opens: 3, fails: 2, openUntil: 77,
		probeIso: "scope/iso-1", probeUntil: 88, reps: []upReport{{1, 6, 5, 0}, {2, 7, 6, 0}}}
	b := st.encode(nil)
	got := newKeyState(lim, st.skey)
	if err := got.decode(b, 64); err != nil {
		t.Fatal(err)
	}
	if got.up == nil || got.up.pause != 99 || got.up.probeIso != "scope/iso-1" || len(got.up.reps) != 2 || got.up.reps[1].limit != 7 {
		t.Fatalf("round trip: %+v", got.up)
	}
	// With tokens, the reports' tokens survive too.
	st.up.reps[0].tok, st.up.reps[1].tok = 1<<63, 5
	b = st.encode(nil)
	got = newKeyState(lim, st.skey)
	if err := got.decode(b, 64); err != nil || got.up.reps[0].tok != 1<<63 || got.up.reps[1].tok != 5 {
		t.Fatalf("round trip with tokens: %+v %v", got.up, err)
	}
	for i := 1; i < len(b); i++ {
		_ = newKeyState(lim, st.skey).decode(b[:i], 64) // must not panic
	}
	bad := append([]byte(nil), b...)
	bad[len(bad)-1-3*5] = 0xff // inside the reports
	_ = newKeyState(lim, st.skey).decode(bad, 64)
}

// Failures reported one batch at a time, by several isolates, add up to
// the threshold (the count is kept between batches), and a stale count is
// forgotten after the reports' horizon.
func TestCircuitCountsFailuresAcrossBatches(t *testing.T) {
	store, err := openMemStore()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := upCfg()
	cfg.Limiters[0].Upstream.CircuitFailures = 3
	m, err := NewMerger(cfg, store, MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := int64(1000e9)
	fail := wire.Signal{Limiter: "llm", Key: "k", Failures: 1}
	for i, iso := range []string{"a", "b"} {
		rp, err := m.Apply(upBatch(iso, 1, t0+int64(i)*1e9, fail), t0+int64(i)*1e9)
		if err != nil {
			t.Fatal(err)
		}
		if u := upViewOf(t, rp); u.Circuit != wire.CircuitClosed {
			t.Fatalf("after %d failures: %+v", i+1, u)
		}
	}
	rp, err := m.Apply(upBatch("c", 1, t0+2e9, fail), t0+2e9)
	if err != nil {
		t.Fatal(err)
	}
	if u := upViewOf(t, rp); u.Circuit != wire.CircuitOpen {
		t.Fatalf("three failures from three isolates: %+v, want open", u)
	}
	// Two failures long ago are forgotten: one more does not open it.
	_, err = m.Apply(upBatch("a", 2, t0+500e9, wire.Signal{Limiter: "llm", Key: "j", Failures: 2}), t0+500e9)
	if err != nil {
		t.Fatal(err)
	}
	rp, err = m.Apply(upBatch("a", 3, t0+700e9, wire.Signal{Limiter: "llm", Key: "j", Failures: 1}), t0+700e9)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range rp.Upstream {
		if u.Key == "j" && u.Circuit != wire.CircuitClosed {
			t.Fatalf("a failure 200 s after two others opened the circuit: %+v", u)
		}
	}
}
