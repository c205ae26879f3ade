package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// withLimits gives a test coordinator's Merger run-time limits and returns
// them.
func withLimits(lims **Limits) func(*testOptions) {
	return func(o *testOptions) {
		*lims = NewLimits(o.Config)
		o.Merger.Limits = *lims
	}
}

// setLimit publishes the next generation of lims with limiter's limit
// (key "") or key's override set to n.
func setLimit(t *testing.T, lims *Limits, limiter, key string, n int64) {
	t.Helper()
	cfg := CloneConfig(lims.Load().Config)
	l := cfg.Limiter(limiter)
	if key == "" {
		l.Limit = n
	} else {
		l.Overrides = append(l.Overrides, wire.Override{Key: key, Limit: n})
	}
	if _, err := lims.Publish(cfg); err != nil {
		t.Fatal(err)
	}
}

// A new limit applies to the next batch of every key already cached, its
// override too, and View.Limit tells the isolates.
func TestLimitsChangeAtRunTime(t *testing.T) {
	var lims *Limits
	c, clk := newTestCoordinator(t, t0, withLimits(&lims))
	w := clk.now() / sec
	limited := &wire.Batch{Version: wire.Version, Isolate: "a", Seq: 1, At: clk.now(), Limits: true,
		Entries: []wire.Delta{{Limiter: "fw", Key: "k", Window: w, Delta: 5}, {Limiter: "fw", Key: "vip", Window: w, Delta: 5}}}
	rp := mustSync(t, c, limited)
	if v, o := viewOf(t, rp, "fw", "k"), viewOf(t, rp, "fw", "vip"); v.Limit != 100 || o.Limit != 1000 {
		t.Fatalf("before: limits %d and %d, want the configuration's 100 and 1000", v.Limit, o.Limit)
	}
	setLimit(t, lims, "fw", "", 7)
	setLimit(t, lims, "fw", "vip", 9)
	limited.Seq, limited.At = 2, clk.now()
	rp = mustSync(t, c, limited)
	// The override given second wins over the configuration's: LimitFor
	// takes the first match, so setLimit appended after "vip"'s 1000.
	if v := viewOf(t, rp, "fw", "k"); v.Limit != 7 {
		t.Fatalf("after: limit %d, want 7", v.Limit)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Limit != 7 {
		t.Fatalf("key state limit %d, want 7", ks.Limit)
	}
	if g := c.m.LimitsGen(); g != 3 {
		t.Fatalf("generation %d, want 3 (configuration + two changes)", g)
	}
	// A change of anything but limits is refused and changes nothing.
	cfg := CloneConfig(lims.Load().Config)
	cfg.Limiter("fw").Period = 2 * sec
	if _, err := lims.Publish(cfg); err == nil {
		t.Fatal("a period change was published")
	}
	cfg = CloneConfig(lims.Load().Config)
	cfg.Limiter("fw").Limit = 0
	if _, err := lims.Publish(cfg); err == nil {
		t.Fatal("a limit of 0 was published")
	}
	if g := lims.Load().Gen; g != 3 {
		t.Fatalf("refused changes moved the generation to %d", g)
	}
}

// Lowering a strict limiter's limit below what is counted and leased: the
// leases already granted stay (the isolates admit up to them), no new one
// is granted, so the window ends at most at what was counted plus what
// the leases held when the limit dropped.
func TestLimitLoweredBelowCount(t *testing.T) {
	var lims *Limits
	c, clk := newTestCoordinator(t, t0, withLimits(&lims))
	w := clk.now() / sec
	d := func(delta, demand int64) wire.Delta {
		return wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: delta, Demand: demand}
	}
	// Two isolates spend 60 of 100 and ask for more: both hold leases.
	mustSync(t, c, batch("a", 1, clk.now(), d(0, 40)))
	mustSync(t, c, batch("b", 1, clk.now(), d(0, 40)))
	mustSync(t, c, batch("a", 2, clk.now(), d(30, 40)))
	mustSync(t, c, batch("b", 2, clk.now(), d(30, 40)))
	before := getKey(t, c, "sfw", "k")
	if before.Count != 60 || before.LeaseSum <= 0 {
		t.Fatalf("before: %+v, want 60 counted and leases held", before)
	}
	held := before.LeaseSum
	setLimit(t, lims, "sfw", "", 20)
	// Each isolate spends its whole lease, then keeps asking.
	la, lb := before.Leases["a"], before.Leases["b"]
	ra := mustSync(t, c, batch("a", 3, clk.now(), d(la, la+10)))
	rb := mustSync(t, c, batch("b", 3, clk.now(), d(lb, lb+10)))
	va, vb := viewOf(t, ra, "sfw", "k"), viewOf(t, rb, "sfw", "k")
	if va.Lease > 0 || vb.Lease > 0 {
		t.Fatalf("leases granted over the lowered limit: a %+v, b %+v", va, vb)
	}
	// Standing leases are for the next window, under the new limit.
	if va.Stand+vb.Stand > 20 {
		t.Fatalf("standing leases %d + %d for the next window, over the new limit of 20", va.Stand, vb.Stand)
	}
	ra = mustSync(t, c, batch("a", 4, clk.now(), d(0, 10)))
	if v := viewOf(t, ra, "sfw", "k"); v.Lease > 0 || !v.Exhausted {
		t.Fatalf("next ask: %+v, want no lease and the window exhausted", v)
	}
	after := getKey(t, c, "sfw", "k")
	if after.Count > before.Count+held {
		t.Fatalf("counted %d, more than %d counted + %d leased when the limit dropped", after.Count, before.Count, held)
	}
	if after.Limit != 20 || after.LeaseSum != 0 {
		t.Fatalf("after: %+v, want limit 20 and no lease", after)
	}
	// The next window starts under the new limit: grants fit 20.
	clk.add(sec)
	w = clk.now() / sec
	ra = mustSync(t, c, batch("a", 5, clk.now(), d(0, 50)))
	rb = mustSync(t, c, batch("b", 4, clk.now(), d(0, 50)))
	if sum := viewOf(t, ra, "sfw", "k").Lease + viewOf(t, rb, "sfw", "k").Lease; sum > 20 || sum <= 0 {
		t.Fatalf("next window: leases sum to %d, want 1..20", sum)
	}
}

// NoticeNear notices the keys near the old limit that take the limiter's
// limit: not a key far below it, nor a key with an override.
func TestNoticeNear(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	w := clk.now() / sec
	mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "hot", Window: w, Delta: 90},
		wire.Delta{Limiter: "fw", Key: "cold", Window: w, Delta: 10}, wire.Delta{Limiter: "fw", Key: "vip", Window: w, Delta: 900}))
	var n, left int
	var noticed []string
	c.withMerger(func(m *Merger) {
		n, left = m.NoticeNear("fw", 100, 10, clk.now())
		for _, e := range m.resets.ents {
			noticed = append(noticed, e.key)
		}
	})
	if n != 1 || left != 0 || len(noticed) != 1 || noticed[0] != "hot" {
		t.Fatalf("noticed %v (%d, %d left), want hot only", noticed, n, left)
	}
	c.withMerger(func(m *Merger) { n, left = m.NoticeNear("fw", 100, 0, clk.now()) })
	if n != 0 || left != 1 {
		t.Fatalf("with max 0: %d noticed, %d left, want 0 and 1", n, left)
	}
}
