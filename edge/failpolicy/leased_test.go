package failpolicy

import "testing"

// TestLeased: on a stale view, open admits lease misses up to the key's
// whole limit per window on the isolate, counting what the module
// admitted within its lease too; local-share admits a lease miss (Apply
// took its share); closed and any denial other than a lease miss keep the
// module's answer.
func TestLeased(t *testing.T) {
	q := Quota{Limit: 5, Period: 100, Isolates: 4}
	sh := NewShare[string](0)
	if !Leased(Open, sh, "k", 2, q, 10, true, false) {
		t.Fatal("open: an admission within the lease stands")
	}
	got := 0
	for i := 0; i < 6; i++ {
		if Leased(Open, sh, "k", 1, q, 20, false, true) {
			got++
		}
	}
	if got != 3 {
		t.Fatalf("open: %d lease misses admitted, want 3 (limit 5 less the 2 admitted within the lease)", got)
	}
	if !Leased(Open, sh, "k", 1, q, 100, false, true) {
		t.Fatal("open: the next window starts afresh")
	}
	if Leased(Open, sh, "j", 1, q, 10, false, false) {
		t.Fatal("open: a denial that is no lease miss stands")
	}
	if !Leased(LocalShare, sh, "s", 1, q, 10, false, true) || Leased(LocalShare, sh, "s", 1, q, 10, false, false) {
		t.Fatal("local-share: a lease miss is admitted, another denial stands")
	}
	if Leased(Closed, sh, "c", 1, q, 10, false, true) || !Leased(Closed, sh, "c", 1, q, 10, true, false) {
		t.Fatal("closed keeps the module's answer")
	}
}
