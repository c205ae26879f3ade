package coordinator

import (
	"fmt"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Leases through the coordinator's public surface, on whichever store the
// suite runs (Pebble here, the Redis Cluster in TestMergeOnRedisCluster):
// isolates asking for more than the limit between them get leases whose
// sum, with the count, never exceeds it; a busy isolate gets a standing
// lease for the next window, reserved there.
func TestLeasesWithinLimitPublic(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	W := t0 / sec
	seq, lease := map[string]int64{}, map[string]int64{}
	var count int64
	for round := 0; round < 6; round++ {
		for i := 0; i < 3; i++ {
			id := fmt.Sprintf("iso%d", i)
			seq[id]++
			clk.add(sec / 50)
			d := min(5, lease[id]) // spent from its lease, as an isolate does
			count += d
			v := viewOf(t, mustSync(t, c, batch(id, seq[id], clk.now(),
				wire.Delta{Limiter: "sfw", Key: "k", Window: W, Delta: d, Demand: 50})), "sfw", "k")
			if v.Count != count {
				t.Fatalf("round %d %s: count %d, want %d", round, id, v.Count, count)
			}
			lease[id] = v.Lease
			ks := getKey(t, c, "sfw", "k")
			if ks.Count+ks.LeaseSum > 100 {
				t.Fatalf("round %d %s: count %d + leases %d over the limit of 100", round, id, ks.Count, ks.LeaseSum)
			}
			if round == 5 && i == 2 && v.Stand <= 0 {
				t.Errorf("a busy isolate (a batch every 60 ms) got no standing lease: %+v", v)
			}
		}
	}
}
