package coordinator

import (
	"context"
	"errors"
	"testing"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

const t0 = coordtest.T0

func TestWindowedCountsAndWindows(t *testing.T) {
	c, clk := newTestCoordinator(t, t0+sec/2, nil)
	rp := mustSync(t, c, batch("a", 1, clk.now(),
		wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 3},
		wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 4},
		wire.Delta{Limiter: "fw", Key: "k", Window: 999, Delta: 5}, // previous window
		wire.Delta{Limiter: "fw", Key: "other", Window: 1000, Delta: 1}))
	if len(rp.Entries) != 2 || rp.Seq != 1 || rp.Version != wire.Version || rp.At != clk.now() {
		t.Fatalf("reply %+v", rp)
	}
	v := viewOf(t, rp, "fw", "k")
	if v.Window != 1000 || v.Count != 7 || v.Prev != 5 || v.TAT != 0 || v.Lease != -1 || v.Isolates != 1 {
		t.Fatalf("view %+v", v)
	}
	// Another isolate reports the next window: counts shift, Isolates = 2.
	clk.set(t0 + sec + 1)
	rp = mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1001, Delta: 2}))
	if v := viewOf(t, rp, "fw", "k"); v.Window != 1001 || v.Count != 2 || v.Prev != 7 || v.Isolates != 2 {
		t.Fatalf("view %+v", v)
	}
	// A late delta for window 1000 lands in Prev; one for 999 is dropped.
	rp = mustSync(t, c, batch("a", 2, clk.now(),
		wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1},
		wire.Delta{Limiter: "fw", Key: "k", Window: 999, Delta: 100}))
	if v := viewOf(t, rp, "fw", "k"); v.Count != 2 || v.Prev != 8 {
		t.Fatalf("view %+v", v)
	}
	if s := c.mergeStats(); s.DeltasStale != 1 {
		t.Fatalf("stale = %d", s.DeltasStale)
	}
	// Window = max(now/period, largest batch window): a batch ahead of the clock.
	rp = mustSync(t, c, batch("a", 3, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1002, Delta: 1}))
	if v := viewOf(t, rp, "fw", "k"); v.Window != 1002 || v.Count != 1 || v.Prev != 2 {
		t.Fatalf("view %+v", v)
	}
	// Time moves two windows on: the view is empty without any write.
	clk.set(t0 + 5*sec)
	ks := getKey(t, c, "fw", "k")
	if ks.Window != 1005 || ks.Count != 0 || ks.Prev != 0 {
		t.Fatalf("state %+v", ks)
	}
	// Isolates expire after 2 periods: a new batch sees only itself.
	rp = mustSync(t, c, batch("c", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1005, Delta: 1}))
	if v := viewOf(t, rp, "fw", "k"); v.Isolates != 1 || v.Count != 1 {
		t.Fatalf("view %+v", v)
	}
}

func TestBucketTAT(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	// tb: 10 per second, T = 100ms per unit.
	rp := mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "tb", Key: "k", Delta: 3}))
	if v := viewOf(t, rp, "tb", "k"); v.TAT != t0+3*sec/10 || v.Window != 0 || v.Lease != -1 {
		t.Fatalf("view %+v", v)
	}
	// Batch time in the past is used (not before now - period), then TAT continues.
	clk.set(t0 + 2*sec)
	rp = mustSync(t, c, batch("a", 2, t0+sec, wire.Delta{Limiter: "tb", Key: "k", Delta: 1}))
	if v := viewOf(t, rp, "tb", "k"); v.TAT != t0+sec+sec/10 {
		t.Fatalf("view %+v want %d", v, t0+sec+sec/10)
	}
	rp = mustSync(t, c, batch("a", 3, 0, wire.Delta{Limiter: "tb", Key: "k", Delta: 1}))
	if v := viewOf(t, rp, "tb", "k"); v.TAT != t0+sec+2*sec/10 {
		t.Fatalf("view %+v", v) // max(TAT, now-period) + T
	}
	// 128-bit math: a huge delta on a long period saturates instead of wrapping.
	if got := limitmath.MulDiv(wire.MaxLimit, wire.MaxPeriod, 1); got <= 0 {
		t.Fatalf("mulDiv overflowed: %d", got)
	}
	if got := limitmath.MulDiv(3, 1e9, 7); got != 428571428 {
		t.Fatalf("mulDiv = %d", got)
	}
}

func TestOverrideLimit(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	if ks := getKey(t, c, "fw", "vip"); ks.Limit != 1000 {
		t.Fatalf("override: %+v", ks)
	}
	_ = clk
}

func TestDuplicateNotAppliedTwice(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	b := batch("a", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 5},
		wire.Delta{Limiter: "tb", Key: "k", Delta: 2})
	first := mustSync(t, c, b)
	for i := 0; i < 3; i++ {
		rp := mustSync(t, c, b)
		if v := viewOf(t, rp, "fw", "k"); v.Count != 5 {
			t.Fatalf("retry %d applied again: %+v", i, v)
		}
		if v := viewOf(t, rp, "tb", "k"); v.TAT != viewOf(t, first, "tb", "k").TAT {
			t.Fatalf("retry %d changed TAT: %+v", i, v)
		}
	}
	// The next Seq is applied; then the previous one is stale.
	rp := mustSync(t, c, batch("a", 2, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1}))
	if v := viewOf(t, rp, "fw", "k"); v.Count != 6 {
		t.Fatalf("view %+v", v)
	}
	if _, err := c.Sync(context.Background(), b); !errors.Is(err, merge.ErrSequence) {
		t.Fatalf("seq 1 after 2: %v", err)
	}
	if s := c.mergeStats(); s.Duplicates != 3 || s.Batches != 2 || s.SeqRefused != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestDuplicateSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	open := func() *Coordinator {
		c, err := Open(Options{Dir: dir, Config: testConfig(), Clock: clock.Func(func() int64 { return t0 }), GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := open()
	b := batch("a", 1, t0, wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 5})
	mustSync(t, c, b)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open()
	defer c.Close()
	if v := viewOf(t, mustSync(t, c, b), "fw", "k"); v.Count != 5 {
		t.Fatalf("after reopen: %+v", v)
	}
}

func TestResetKey(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 5}))
	if err := c.ResetKey(t.Context(), "fw", "k"); err != nil {
		t.Fatal(err)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 0 {
		t.Fatalf("after reset %+v", ks)
	}
	if err := c.ResetKey(t.Context(), "nope", "k"); err == nil {
		t.Fatal("reset of an unknown limiter succeeded")
	}
}

func TestGCDeletesExpiredKeysAndIdleIsolates(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, func(o *Options) { o.Merger.MaxCachedKeys = 1 })
	for i, k := range []string{"a", "b", "c"} {
		mustSync(t, c, batch("iso"+k, 1, clk.now(), wire.Delta{Limiter: "fw", Key: k, Window: 1000, Delta: int64(i + 1)}))
	}
	// Checkpointed keys leave the cache (all but one).
	if err := c.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Nothing has expired yet.
	if n, err := c.GC(t.Context()); err != nil || n != 0 {
		t.Fatalf("GC = %d, %v", n, err)
	}
	clk.set(t0 + 3*sec)
	total := 0
	for i := 0; i < 3; i++ { // keys pass, then isolates pass
		n, err := c.GC(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total < 2 { // at most one key is cached and skipped
		t.Fatalf("GC deleted %d records", total)
	}
	// High-water marks go after IsolateTTL.
	clk.set(t0 + 25*3600*sec)
	for i := 0; i < 3; i++ {
		if _, err := c.GC(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	c.withMerger(func(*merge.Merger) { // between two groups
		c.store.Scan([]byte{merge.PrefixHWM}, nil, func(k, v []byte) bool { n++; return true })
	})
	if n != 0 {
		t.Fatalf("%d high-water marks left after the TTL", n)
	}
}
