package coordinator

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A sparse isolate far from the limit (a request every 1.5 s on a strict
// 100/s key, asking for it at once) that reads View.StandTo (its batches
// say Spans) is told a standing unit over several windows once its pace
// is measured, so that its next request, some windows on, decides
// locally. Over a shared store (Redis Cluster: TestMergeOnRedisCluster)
// as over Pebble: the shared merge used to drop the batch's Spans, and
// sparse isolates there stood in the next window only.
func TestSparseIsolateStandsOverSeveralWindows(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	var seq int64
	far := 0
	for round := 0; round < 12; round++ {
		clk.add(3 * sec / 2)
		seq++
		w := clk.now() / sec
		b := batch("sparse", seq, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 1, Demand: 1})
		b.Spans = true
		v := viewOf(t, mustSync(t, c, b), "sfw", "k")
		if v.StandTo > w+1 && v.Stand > 0 {
			far++
		}
		if ks := getKey(t, c, "sfw", "k"); ks.Count+ks.LeaseSum > 100 {
			t.Fatalf("round %d: count %d + leases %d over the limit of 100", round, ks.Count, ks.LeaseSum)
		}
	}
	if far == 0 {
		t.Fatal("a sparse isolate far from the limit was never told a standing unit past the next window")
	}
	t.Logf("%d of 12 views stood past the next window", far)
}
