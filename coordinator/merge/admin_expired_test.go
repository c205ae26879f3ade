package merge

import (
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestKeyStateShowsExpiredLeases: a lease whose life ended stays reserved,
// as spent, until its window ends (its isolate may have admitted all of it
// and died before reporting); the key's state says which part of
// lease_sum that is, where it showed a count of 0 with the whole limit
// "leased" and nothing to tell why.
func TestKeyStateShowsExpiredLeases(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) {
		o.Merger.LeaseLife, o.Merger.LeaseGrace = 100*time.Millisecond, 100*time.Millisecond
	})
	clk.set((t0/sec + 1) * sec)
	w := clk.now() / sec
	la := viewOf(t, mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 30})), "sfw", "k").Lease
	if la < 1 {
		t.Fatalf("lease %d", la)
	}
	clk.add(sec / 10)
	lb := viewOf(t, mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 5})), "sfw", "k").Lease
	// 150 ms later: a's lease (granted at 0) expired, b's (at 100 ms) not.
	clk.add(sec * 15 / 100)
	ks := getKey(t, c, "sfw", "k")
	if ks.LeaseSum != la+lb || ks.ExpiredLeaseSum != la {
		t.Fatalf("lease_sum %d, expired %d; want %d and %d (a's lease of %d expired, b's %d alive)", ks.LeaseSum, ks.ExpiredLeaseSum, la+lb, la, la, lb)
	}
	// In the next window nothing is held.
	clk.set((w + 1) * sec)
	if ks := getKey(t, c, "sfw", "k"); ks.LeaseSum != 0 || ks.ExpiredLeaseSum != 0 {
		t.Fatalf("next window: lease_sum %d, expired %d", ks.LeaseSum, ks.ExpiredLeaseSum)
	}
}
