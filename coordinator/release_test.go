package coordinator

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestGracefulStopGivesLeasesBack: an isolate's last batch (Batch.End)
// gives its leases back at once, on every key it names: nothing of them
// stays reserved. Run on a Redis Cluster too (TestMergeOnRedisCluster),
// where a batch is applied in parts, one per bucket: the parts lacked the
// batch's End, and a stopped isolate's leases stayed reserved, as spent,
// for the rest of their windows.
func TestGracefulStopGivesLeasesBack(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	W := clk.now() / sec
	keys := []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"} // over several buckets
	var ents []wire.Delta
	for _, k := range keys {
		ents = append(ents, wire.Delta{Limiter: "sfw", Key: k, Window: W, Demand: 10})
	}
	rp := mustSync(t, c, batch("a", 1, clk.now(), ents...))
	for _, k := range keys {
		if v := viewOf(t, rp, "sfw", k); v.Lease <= 0 {
			t.Fatalf("%s: no lease (%d) for a demand of 10", k, v.Lease)
		}
	}
	for i := range ents {
		ents[i].Delta, ents[i].Demand = 3, 3
	}
	end := batch("a", 2, clk.now()+1, ents...)
	end.End = true
	rp = mustSync(t, c, end)
	for _, k := range keys {
		v := viewOf(t, rp, "sfw", k)
		ks := getKey(t, c, "sfw", k)
		if v.Lease != 0 || ks.Count != 3 || ks.LeaseSum != 0 {
			t.Errorf("%s after the last batch: lease %d, count %d, %d reserved; want 0, the 3 reported, 0", k, v.Lease, ks.Count, ks.LeaseSum)
		}
	}
}
