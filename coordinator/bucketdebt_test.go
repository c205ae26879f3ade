package coordinator

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestHugeCostBucketRecovers: one batch with a cost of 2^40 on an
// approximate token bucket (tb: 10/s, burst 20) left the key denying for
// good (its TAT saturated; every view 32 s ahead). 16 burst refills (32 s)
// and a second later, another isolate finds it full: its unit of cost
// puts the TAT one unit (100 ms) ahead. Run on Pebble and, by
// TestMergeOnRedisCluster, on a Redis Cluster.
func TestHugeCostBucketRecovers(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	mustSync(t, c, batch("evil", 1, clk.now(), wire.Delta{Limiter: "tb", Key: "k", Delta: 1 << 40, Demand: 1 << 40}))
	clk.set(t0 + 33*sec)
	rp := mustSync(t, c, batch("honest", 1, clk.now(), wire.Delta{Limiter: "tb", Key: "k", Delta: 1, Demand: 1}))
	if v := viewOf(t, rp, "tb", "k"); v.TAT != clk.now()+sec/10 {
		t.Fatalf("33 s after a cost of 2^40, a unit leaves the TAT %.1f s ahead, want 0.1 s (the bucket was full)", float64(v.TAT-clk.now())/1e9)
	}
}
