package coordinator

import (
	"fmt"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestSparseCostlyAskGrantedNothing: on a key whose sparse asks are
// costly requests, a sparse isolate refused a cost the window cannot cover
// whole holds one request (merge's oneRequest); a grant short of it would
// admit none of it and keep the units from the others' smaller requests,
// so it is granted nothing, and the units stay free. Run on a Redis
// Cluster too (TestMergeOnRedisCluster), where every batch is merged on
// the record read afresh: what the key's asks say of its requests' cost
// was not in the record there, and a was granted 2 units it could not use.
func TestSparseCostlyAskGrantedNothing(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	clk.set((t0/sec + 1) * sec)
	// In the window before, 8 sparse isolates asked for a request of cost
	// 40 each: the key's requests are costly.
	for i := range 8 {
		mustSync(t, c, batch(fmt.Sprintf("s%d", i), 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: clk.now() / sec, Demand: 40}))
	}
	clk.add(sec)
	w := clk.now() / sec
	// b fills the window but for 30 units (sfw: 100/s).
	mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 70, Demand: 70}))
	clk.add(sec / 100)
	// a, sparse, asks for one request of cost 40.
	va := viewOf(t, mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 40})), "sfw", "k")
	if va.Lease != 0 {
		t.Fatalf("sparse isolate refused 40 with 30 free: lease %d, want 0", va.Lease)
	}
	if l := getKey(t, c, "sfw", "k").Leases["a"]; l != 0 {
		t.Fatalf("reserved for a: %d, want 0", l)
	}
	// The 30 serve the others' requests of cost 1.
	vc := viewOf(t, mustSync(t, c, batch("c", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 1})), "sfw", "k")
	if vc.Lease < 1 {
		t.Fatalf("an isolate asking 1 with 30 free: lease %d", vc.Lease)
	}
	if ks := getKey(t, c, "sfw", "k"); ks.Count+ks.LeaseSum > 100 {
		t.Fatalf("count %d + leases %d over the limit 100", ks.Count, ks.LeaseSum)
	}
}
