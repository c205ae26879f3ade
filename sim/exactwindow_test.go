package sim

import (
	"testing"
	"time"
)

// A window is measured against what an exact counter could admit of what
// it was offered, not min(offered, limit): requests of cost 30 on a limit
// of 100 fit three to a window (90), and central, which is exact, read
// 10% unserved and 90% utilisation; requests of cost 10 on a limit of 5
// never fit, and every strategy read 100% unserved.
func TestUnevenCostsMeasuredAgainstExactCounter(t *testing.T) {
	sc := small(t, 4, 100, 20, "poisson", 10*time.Second)
	sc.Traffic[0].Cost = 30
	r := runScenario(t, sc, Central)
	t.Logf("cost 30 of 100, central: unserved %.2f%%, utilisation %.2f%%, admitted %d", r.UnservedPct, r.Utilisation, r.Admitted)
	if r.Admitted == 0 || r.Unserved != 0 || r.Utilisation != 100 || r.WorstOverrun != 0 {
		t.Errorf("cost 30 of 100, central: unserved %d (%.2f%%), utilisation %.2f%%, worst overrun %d; want 0, 100%%, 0",
			r.Unserved, r.UnservedPct, r.Utilisation, r.WorstOverrun)
	}

	sc = small(t, 4, 5, 20, "poisson", 5*time.Second)
	sc.Traffic[0].Cost = 10
	for _, strategy := range []string{LocalOnly, Central, Auto} {
		r := runScenario(t, sc, strategy)
		if r.Requests == 0 || r.Admitted != 0 || r.Unserved != 0 || r.UnservedPct != 0 || r.Utilisation != 100 {
			t.Errorf("cost 10 of 5, %s: %d requests, admitted %d, unserved %d (%.2f%%), utilisation %.1f%%; want none admitted, none unserved, all there was to admit",
				strategy, r.Requests, r.Admitted, r.Unserved, r.UnservedPct, r.Utilisation)
		}
	}
}

// The exact counter decides greedily, in order; a strategy that packed a
// window better (it refused a cost the counter took and admitted more,
// within the capacity) is measured against what it admitted, so its
// utilisation reads 100%, not more, and nothing reads unserved.
func TestBetterPackingIsItsOwnBound(t *testing.T) {
	k := &keyInfo{cap: 100, period: int64(time.Second)}
	var tr truth
	for _, c := range []int64{70, 50, 50} {
		tr.offerExact(k, c)
	}
	if tr.exact != 70 {
		t.Fatalf("exact counter of 70, 50, 50 within 100: %d, want 70", tr.exact)
	}
	tr.admitted, tr.denied = 100, 70 // the strategy refused the 70, admitted both 50s
	if b := tr.bound(k); b != 100 {
		t.Errorf("bound after a better packing: %d, want 100 (what it admitted)", b)
	}
	tr.admitted, tr.denied = 120, 50 // over the capacity: no better packing
	if b := tr.bound(k); b != 70 {
		t.Errorf("bound after an overrun: %d, want the exact counter's 70", b)
	}
}
