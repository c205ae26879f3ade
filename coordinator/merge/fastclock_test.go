package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// An entry for the next window (an isolate whose clock runs fast, within
// MaxClockSkew, or a client with an edge token) moves a key a window ahead
// of the coordinator's clock. Honest isolates still report what they
// admitted in the window before the coordinator's current one (a batch cut
// before the boundary, applied after it): that cost is counted (in the
// key's previous window, the coordinator's current one), not dropped as
// stale. Before, 10 of 10 such batches were dropped.
func TestFastClockDropsNoOthersCounts(t *testing.T) {
	for _, lim := range []string{"fw", "sw", "sfw"} {
		c, clk := newTestCoordinator(t, t0+sec+sec/100, nil) // 10 ms into window 1001
		mustSync(t, c, batch("fast", 1, clk.now(), wire.Delta{Limiter: lim, Key: "k", Window: 1002, Delta: 1, Demand: 1}))
		for i := int64(0); i < 10; i++ {
			mustSync(t, c, batch("honest", 1+i, t0+sec-sec/100, wire.Delta{Limiter: lim, Key: "k", Window: 1000, Delta: 5, Demand: 5}))
		}
		c.withMerger(func(m *Merger) {
			st := m.keys[string(appendKeyStorageKey(nil, lim, "k"))]
			cnt, prv := st.windowCounts(1002)
			if cnt != 1 || prv != 50 || m.stats.DeltasStale != 0 {
				t.Errorf("%s: window 1002 counts %d, 1001 %d, %d stale; want 1, 50 (the honest reports of 1000, a window late), 0",
					lim, cnt, prv, m.stats.DeltasStale)
			}
		})
		// Once the coordinator's clock is in the key's window, an entry two
		// windows old is stale as before.
		clk.set(t0 + 2*sec + sec/100)
		mustSync(t, c, batch("late", 1, t0+sec-sec/100, wire.Delta{Limiter: lim, Key: "k", Window: 1000, Delta: 5, Demand: 5}))
		c.withMerger(func(m *Merger) {
			if m.stats.DeltasStale != 1 {
				t.Errorf("%s: %d stale, want 1", lim, m.stats.DeltasStale)
			}
		})
	}
}
