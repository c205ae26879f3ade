package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// isoOf returns a copy of isolate id's state for (limiter, key).
func isoOf(t *testing.T, c *testCoordinator, limiter, key, id string) isoState {
	t.Helper()
	var out isoState
	found := false
	c.withMerger(func(m *Merger) {
		st, ok := m.keys[string(appendKeyStorageKey(nil, limiter, key))]
		if !ok {
			return
		}
		if i := st.findIso(id); i >= 0 {
			out, found = st.isos[i], true
		}
	})
	if !found {
		t.Fatalf("no state of isolate %s for %s/%s", id, limiter, key)
	}
	return out
}

// A request refused for want of a lease is asked for in one batch and,
// decided again under the lease the reply brought, reported as cost in
// the next: the coordinator counts it as one request of demand, not two
// (counted twice, every isolate that waits looks twice as busy, and the
// fleet's pace that decides what isolates may hold ahead doubles).
func TestRetriedRequestCountsOnce(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	w := clk.now() / sec
	// Batch 1: the request, refused, asks for a unit.
	v := viewOf(t, mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 1})), "sfw", "k")
	if v.Lease < 1 {
		t.Fatalf("a refused request got lease %d, want >= 1", v.Lease)
	}
	d1 := isoOf(t, c, "sfw", "k", "a").demand
	// Batch 2: the same request, admitted under that lease, reported.
	clk.add(sec / 10)
	mustSync(t, c, batch("a", 2, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 1, Demand: 1}))
	d2 := isoOf(t, c, "sfw", "k", "a").demand
	if want := d1 / 2; d2 != want {
		t.Fatalf("demand after the retried request's report = %d, want %d (no new demand; it was %d)", d2, want, d1)
	}
	// Batch 3: a new request admitted under a lease held ahead counts.
	clk.add(sec / 10)
	mustSync(t, c, batch("a", 3, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 1, Demand: 1}))
	if d3, want := isoOf(t, c, "sfw", "k", "a").demand, (d2+demandScale)/2; d3 != want {
		t.Fatalf("demand after a new request = %d, want %d", d3, want)
	}
}

// A sparse isolate that holds a unit it has not used keeps it when the
// coordinator would grant it less: the reservation cannot shrink before
// the isolate's next batch anyway (it may still admit under what it was
// told), and that batch comes with its next request, which the unit
// decides locally. Taking it back only made that request wait while the
// unit stayed reserved, unused, until the window ended.
func TestSparseIsolateKeepsItsUnusedUnit(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	clk.set((t0/sec + 1) * sec) // the start of a window
	w := clk.now() / sec
	// a asks once and is granted what it asked for (at least the unit).
	v := viewOf(t, mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 1})), "sfw", "k")
	if v.Lease < 1 {
		t.Fatalf("lease %d, want >= 1", v.Lease)
	}
	held := v.Lease
	// A busy fleet fills most of the window: a's unit ahead is no longer
	// worth holding (strand.go), and its share of what is left is small.
	seqs := map[string]int64{}
	for i := 0; i < 9; i++ {
		clk.add(sec / 20)
		for _, id := range []string{"b", "c", "d"} {
			seqs[id]++
			mustSync(t, c, batch(id, seqs[id], clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 3, Demand: 6}))
		}
	}
	// a syncs (for another key: its entry for k names it, nothing used).
	v = viewOf(t, mustSync(t, c, batch("a", 2, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w})), "sfw", "k")
	if v.Window != w {
		t.Fatalf("the window ended during the test (view of %d, want %d)", v.Window, w)
	}
	is := isoOf(t, c, "sfw", "k", "a")
	if v.Lease != held || is.lease != held {
		t.Fatalf("a's unused lease of %d: told %d, reserved %d; want both %d", held, v.Lease, is.lease, held)
	}
	checkLeaseInvariant(t, c)
}
