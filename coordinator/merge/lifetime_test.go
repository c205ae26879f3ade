package merge

import (
	"time"

	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A lease carries its life, a graceful stop (Batch.End) gives every lease
// back at once, and a lease that outlived its isolate stays reserved, as
// spent, for its own window only: the next window's standing lease is
// given back.
func TestLeaseLifeAndRelease(t *testing.T) {
	// A life shorter than the 1 s window, so that the next window begins
	// after a lease granted early in this one has ended.
	const life, grace = 100 * time.Millisecond, 100 * time.Millisecond
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) { o.Merger.LeaseLife, o.Merger.LeaseGrace = life, grace })
	W := t0 / sec
	reserved := func(w int64) int64 {
		t.Helper()
		var r int64
		c.withMerger(func(m *Merger) {
			_, r, _ = m.Reserved("sfw", "k", w, clk.now())
		})
		return r
	}
	v := viewOf(t, mustSync(t, c, batch("a", 1, t0, wire.Delta{Limiter: "sfw", Key: "k", Window: W, Delta: 0, Demand: 10})), "sfw", "k")
	if v.Lease <= 0 || v.Life != int64(life) {
		t.Fatalf("lease %d, life %d; want a lease with life %d", v.Lease, v.Life, int64(life))
	}
	if r := reserved(W); r != v.Lease {
		t.Fatalf("reserved %d, want the lease %d", r, v.Lease)
	}
	end := batch("a", 2, t0+1, wire.Delta{Limiter: "sfw", Key: "k", Window: W, Delta: 3})
	end.End = true
	v = viewOf(t, mustSync(t, c, end), "sfw", "k")
	if v.Lease != 0 || v.Count != 3 {
		t.Fatalf("after the last batch: lease %d, count %d; want 0 and the 3 reported", v.Lease, v.Count)
	}
	if r := reserved(W); r != 0 {
		t.Fatalf("after the last batch %d stay reserved, want 0", r)
	}

	// A busy isolate gets a standing lease for W+1, then dies.
	var stand int64
	at := t0
	for seq := int64(1); seq <= 8; seq++ {
		at = t0 + seq*sec/20
		clk.set(at)
		v = viewOf(t, mustSync(t, c, batch("b", seq, at, wire.Delta{Limiter: "sfw", Key: "k", Window: W, Delta: 1, Demand: 1})), "sfw", "k")
		stand = v.Stand
	}
	if stand <= 0 {
		t.Fatalf("a busy isolate got no standing lease (stand %d)", stand)
	}
	if r := reserved(W + 1); r < stand {
		t.Fatalf("W+1 reserves %d, want at least the standing lease %d", r, stand)
	}
	held := reserved(W)
	clk.set(at + int64(life+grace)) // past the expiry, still in W
	if clk.now() >= (W+1)*sec {
		t.Fatal("the schedule left window W")
	}
	if r := reserved(W + 1); r != 0 {
		t.Errorf("W+1 begins after the dead isolate's lease ended, yet %d stay reserved there", r)
	}
	if r := reserved(W); r != held {
		t.Errorf("W (alive under the lease) reserves %d after the expiry, want the %d held (counted as spent)", r, held)
	}
}

// A bucket lease whose isolate died ends with its life: it is charged to
// the bucket as spent at its end, and the bucket refills it, so another
// isolate gets the whole burst back once the refill time has passed. (It
// used to stay reserved until its holder reported, which a dead isolate
// never does: the bucket stayed short of its burst for good.)
func TestDeadIsolatesBucketLeaseComesBack(t *testing.T) {
	const life, grace = 100 * time.Millisecond, 100 * time.Millisecond
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) { o.Merger.LeaseLife, o.Merger.LeaseGrace = life, grace })
	// stb: 50/s, burst 100. Isolate a asks for 60, gets a lease, dies.
	va := viewOf(t, mustSync(t, c, batch("a", 1, t0, wire.Delta{Limiter: "stb", Key: "k", Demand: 60})), "stb", "k")
	if va.Lease <= 0 {
		t.Fatalf("isolate a got lease %d, want some", va.Lease)
	}
	// 5 s later (the lease ended 4.8 s ago; the bucket refills 100 in 2 s),
	// isolate b asks for the whole burst in a few syncs.
	at := t0 + 5*sec
	var got int64
	for seq := int64(1); seq <= 4; seq++ {
		at += sec / 100
		clk.set(at)
		v := viewOf(t, mustSync(t, c, batch("b", seq, at, wire.Delta{Limiter: "stb", Key: "k", Demand: 100})), "stb", "k")
		got = v.Lease
	}
	if got < 100-1 {
		t.Fatalf("isolate b holds a lease of %d after a's lease of %d ended 5 s ago; want the burst (100) back", got, va.Lease)
	}
	// And never more than the bucket holds: a's lease was charged.
	c.withMerger(func(m *Merger) {
		ks, err := m.KeyState("stb", "k", clk.now())
		if err != nil {
			t.Fatal(err)
		}
		if ks.LeaseSum > 100 {
			t.Errorf("leases %d > burst 100", ks.LeaseSum)
		}
	})
}

// An isolate silent past its bucket lease's life, whose lease was charged
// at its expiry and whose entry was then forgotten, reports what it spent
// under it after all: the bucket is not charged a second time past empty
// (it owes at most its burst), so others are refused no longer than the
// lease's cost.
func TestLateReportOfChargedBucketLease(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	// stb: 50/s, burst 100. Isolate a gets the whole burst and spends it.
	va := viewOf(t, mustSync(t, c, batch("a", 1, t0, wire.Delta{Limiter: "stb", Key: "k", Demand: 100})), "stb", "k")
	if va.Lease < 50 {
		t.Fatalf("isolate a got lease %d, want most of the burst", va.Lease)
	}
	// 3 s later (its life and grace are over, and it was not seen for two
	// periods) b's syncs charge a's lease to the bucket and forget a.
	clk.set(t0 + 3*sec)
	for seq := int64(1); seq <= 2; seq++ {
		mustSync(t, c, batch("b", seq, clk.now(), wire.Delta{Limiter: "stb", Key: "k", Demand: 1}))
	}
	// a's batch cut at t0 + 0.5 s comes now, reporting the lease spent.
	mustSync(t, c, batch("a", 2, t0+sec/2, wire.Delta{Limiter: "stb", Key: "k", Delta: va.Lease}))
	c.withMerger(func(m *Merger) {
		for _, st := range m.keys {
			if st.lim.Name != "stb" {
				continue
			}
			if owed := mulDiv(max(0, st.tat-clk.now()), 50, sec); owed > 100 {
				t.Errorf("the bucket owes %d tokens after a's late report of %d, want at most its burst (100): charged twice", owed, va.Lease)
			}
		}
	})
}

// The coordinator's limit reaches a batch that asks for it (Batch.Limits)
// and no other: a module that does not ask reads views of 11 elements.
func TestViewLimitOnlyWhenAsked(t *testing.T) {
	c, _ := newTestCoordinator(t, t0, nil)
	W := t0 / sec
	b := batch("a", 1, t0, wire.Delta{Limiter: "sfw", Key: "k", Window: W, Demand: 1})
	if v := viewOf(t, mustSync(t, c, b), "sfw", "k"); v.Limit != 0 {
		t.Fatalf("a batch without lim got limit %d in its view, want none", v.Limit)
	}
	rp := mustSync(t, c, b) // the retry: the same reply shape
	if enc := rp.Entries[0].AppendMsg(nil); enc[0] != 0x9b {
		t.Fatalf("the view of a batch without lim encodes as %#x, want an array of 11 (0x9b)", enc[0])
	}
	b2 := batch("a", 2, t0+1, wire.Delta{Limiter: "sfw", Key: "k", Window: W, Demand: 1})
	b2.Limits = true
	v := viewOf(t, mustSync(t, c, b2), "sfw", "k")
	var want int64
	for _, l := range testConfig().Limiters {
		if l.Name == "sfw" {
			want = l.LimitFor("k")
		}
	}
	if v.Limit != want || want == 0 {
		t.Fatalf("a batch with lim got limit %d, want the coordinator's %d", v.Limit, want)
	}
}
