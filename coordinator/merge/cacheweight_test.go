package merge

import (
	"strconv"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Long keys count for more of MaxCachedKeys (cacheWeight): 40 keys of 250
// bytes, each counting for 3, leave at most a third as many cached as
// short ones would.
func TestLongKeysWeighMore(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) { o.Merger.MaxCachedKeys = 30 })
	long := strings.Repeat("k", 250)
	for i := 0; i < 40; i++ {
		mustSync(t, c, batch("a"+strconv.Itoa(i), 1, clk.now(), wire.Delta{Limiter: "fw", Key: long + strconv.Itoa(i), Window: 1000, Delta: 1}))
		if i%10 == 9 {
			if err := c.Checkpoint(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.withMerger(func(m *Merger) {
		if n, w := m.CachedKeys(), m.keyWeight; w > 30 || n > 10 || w != 3*n {
			t.Errorf("%d long keys cached, weight %d; want at most 10 keys, weight 3 each, at most 30", n, w)
		}
	})
	if ks := getKey(t, c, "fw", long+"0"); ks.Count != 1 {
		t.Fatalf("an evicted key read again: %+v", ks)
	}
}
