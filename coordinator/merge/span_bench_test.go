package merge

import (
	"fmt"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// BenchmarkSparseGrants is the coordinator's cost of a sparse isolate's
// batch on a strict key far under its limit (64 isolates, a request every
// few windows each, every batch asking a unit): the grant, its standing
// unit and, for a module that reads StandTo, the windows it stands in
// (spanWindows). ns/op is per batch.
func BenchmarkSparseGrants(b *testing.B) {
	for _, spans := range []bool{false, true} {
		b.Run(fmt.Sprintf("spans=%v", spans), func(b *testing.B) {
			c, clk := newTestCoordinator(b, t0, nil)
			const isolates = 64
			seq := make([]int64, isolates)
			ids := make([]string, isolates)
			for i := range ids {
				ids[i] = fmt.Sprintf("bench-%02d", i)
			}
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				now := clk.add(sec / 20) // 20 batches a window in all: 0.3 per isolate
				i := n % isolates
				seq[i]++
				bt := batch(ids[i], seq[i], now, wire.Delta{Limiter: "sfw", Key: "k", Window: now / sec, Demand: 1})
				bt.Spans = spans
				if _, err := c.Sync(b.Context(), bt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
