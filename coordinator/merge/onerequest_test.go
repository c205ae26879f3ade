package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestPartialGrantOnlyForSeveralRequests: on a key whose sparse asks are
// costly requests, a sparse isolate refused a cost the window cannot cover
// whole holds one request (oneRequest); a grant
// short of it would admit none of it and keep the units from the others'
// smaller requests, so it is granted nothing, and the units stay free. An
// isolate that syncs the key often holds several requests and gets what
// is left.
func TestPartialGrantOnlyForSeveralRequests(t *testing.T) {
	// (A sparse isolate's case: TestSparseCostlyAskGrantedNothing, in the
	// coordinator package, run on both stores.)
	// h syncs the key every 50 ms asking 5 each time (100 a window): what
	// it is refused is several requests, served in part.
	c, clk := newTestCoordinator(t, t0, nil)
	clk.set((t0/sec + 1) * sec)
	w := clk.now() / sec
	var seq, lease int64
	for range 8 {
		seq++
		lease = viewOf(t, mustSync(t, c, batch("h", seq, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: min(5, lease), Demand: 5})), "sfw", "k").Lease
		clk.add(sec / 20)
	}
	is := isoOf(t, c, "sfw", "k", "h")
	if !frequent(&is, sec) {
		t.Fatalf("h's gap %d ns: not frequent", is.gap)
	}
	// b leaves 20 units of the window free.
	used := getKey(t, c, "sfw", "k").Count
	mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 80 - used - is.lease, Demand: 80 - used - is.lease}))
	seq++
	v := viewOf(t, mustSync(t, c, batch("h", seq, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: is.lease + 40})), "sfw", "k")
	if v.Lease <= is.lease || v.Lease >= is.lease+40 {
		t.Fatalf("frequent isolate holding %d refused 40 with 20 free: lease %d, want more, short of %d", is.lease, v.Lease, is.lease+40)
	}
	checkLeaseInvariant(t, c)
}

// TestAmendmentOnAFullWindowSaysExhausted: an amendment asking for more
// when nothing of the window is free is answered exhausted, so that the
// isolate denies what it holds at once instead of asking again in its next
// batch (a denial after two round trips).
func TestAmendmentOnAFullWindowSaysExhausted(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	clk.set((t0/sec + 1) * sec)
	w := clk.now() / sec
	mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 70, Demand: 70}))
	// h asks for 20 (its demand: 20 a window), a for 1.
	h1 := batch("h", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 20})
	lh := viewOf(t, mustSync(t, c, h1), "sfw", "k").Lease
	a1 := batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 1})
	la := viewOf(t, mustSync(t, c, a1), "sfw", "k").Lease
	if lh < 1 || la < 1 {
		t.Fatalf("leases h %d, a %d: want both served", lh, la)
	}
	// c takes what is left.
	ks := getKey(t, c, "sfw", "k")
	mustSync(t, c, batch("c", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 100 - ks.Count - ks.LeaseSum}))
	if ks := getKey(t, c, "sfw", "k"); ks.Count+ks.LeaseSum != 100 {
		t.Fatalf("count %d + leases %d: the test needs the window full", ks.Count, ks.LeaseSum)
	}
	clk.add(sec / 100)
	// a, asking for one more than it holds, is told.
	v := viewOf(t, mustSync(t, c, amend(a1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: la + 1})), "sfw", "k")
	if v.Lease != la || !v.Exhausted {
		t.Fatalf("amendment on a full window: lease %d (had %d), exhausted %v; want the same lease, exhausted", v.Lease, la, v.Exhausted)
	}
	// h, busier than what it asks for (its demand per window at least
	// twice the ask), is not: its held requests get what the others give
	// back.
	v = viewOf(t, mustSync(t, c, amend(h1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: lh + 1})), "sfw", "k")
	if v.Lease != lh || v.Exhausted {
		t.Fatalf("a busy isolate's amendment on a full window: lease %d (had %d), exhausted %v; want the same lease, not exhausted", v.Lease, lh, v.Exhausted)
	}
	// An ask its lease covers says nothing new.
	v = viewOf(t, mustSync(t, c, amend(a1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: la})), "sfw", "k")
	if v.Exhausted {
		t.Fatalf("an ask the lease covers: exhausted")
	}
	checkLeaseInvariant(t, c)
}

// TestBurstOnAFreshKeyServedInPart: a sparse isolate's large ask is taken
// for one request only where the key's sparse asks show costly requests
// (fitShare under 1/2). On a fresh key, an isolate that holds a burst of
// requests of cost 1 (the JavaScript package's close test: 10 at once,
// whose batch read 12 refused with 7 free) gets what is free: taken for
// one request, it got nothing and admitted 3 of 10 in 6 of 15 runs under
// load.
func TestBurstOnAFreshKeyServedInPart(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	clk.set((t0/sec + 1) * sec)
	w := clk.now() / sec
	// Others hold 90 of the window (b, whose cost was admitted, not
	// refused: no sample of the key's request cost).
	mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 90, Demand: 90}))
	// a asks for 1, amends its batch asking for 3 in all, then reports 2
	// admitted and 12 refused (the close test's batch) with 8 free.
	b1 := batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 1})
	mustSync(t, c, b1)
	clk.add(sec / 100)
	mustSync(t, c, amend(b1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: 3}))
	clk.add(sec / 100)
	ks := getKey(t, c, "sfw", "k")
	held := ks.Leases["a"]
	v := viewOf(t, mustSync(t, c, batch("a", 2, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 2, Demand: 14})), "sfw", "k")
	free := 100 - ks.Count - ks.LeaseSum
	if want := held - 2 + free; v.Lease != want {
		t.Fatalf("a burst of 12 with %d free, holding %d (2 of it used): lease %d, want %d", free, held, v.Lease, want)
	}
	checkLeaseInvariant(t, c)
}
