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
// stale. Before, 10 of 10 such batches were dropped. (A sliding window
// counts the entry ahead in the coordinator's window instead:
// TestAheadEntryKeepsSlidingPrev.)
func TestFastClockDropsNoOthersCounts(t *testing.T) {
	for _, lim := range []string{"fw", "sfw"} {
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

// A sliding window weighs the previous window's count: an entry for the
// next window (a client with an edge token, or an honest edge whose clock
// runs fast within MaxClockSkew) is counted in the coordinator's current
// window, and the key keeps the previous one's. Before, one entry of cost
// 0 for window 1002, 20 ms into 1001, rolled the key there and dropped
// 1000's 100 from every view: the estimate fell from about 98 to 0 and
// the fleet could admit the limit again.
func TestAheadEntryKeepsSlidingPrev(t *testing.T) {
	for _, lim := range []string{"sw", "ssw"} {
		c, clk := newTestCoordinator(t, t0+sec/2, nil) // window 1000
		if lim == "ssw" {
			v := viewOf(t, mustSync(t, c, batch("honest", 1, clk.now(), wire.Delta{Limiter: lim, Key: "k", Window: 1000, Demand: 100})), lim, "k")
			if v.Lease != 100 {
				t.Fatalf("%s: lease %d, want 100", lim, v.Lease)
			}
			mustSync(t, c, batch("honest", 2, clk.now(), wire.Delta{Limiter: lim, Key: "k", Window: 1000, Delta: 100, Demand: 100}))
		} else {
			mustSync(t, c, batch("honest", 1, clk.now(), wire.Delta{Limiter: lim, Key: "k", Window: 1000, Delta: 100, Demand: 100}))
			mustSync(t, c, batch("honest", 2, clk.now(), wire.Delta{Limiter: lim, Key: "other", Window: 1000, Delta: 1, Demand: 1}))
		}
		clk.set(t0 + sec + sec/50) // 20 ms into window 1001
		mustSync(t, c, batch("fast", 1, clk.now(), wire.Delta{Limiter: lim, Key: "k", Window: 1002}))
		v := viewOf(t, mustSync(t, c, batch("honest", 3, clk.now(), wire.Delta{Limiter: lim, Key: "k", Window: 1001, Demand: 1})), lim, "k")
		if v.Window != 1001 || v.Count != 0 || v.Prev != 100 {
			t.Errorf("%s: the honest isolate's view after an entry for the next window: window %d, count %d, prev %d; want 1001, 0, 100", lim, v.Window, v.Count, v.Prev)
		}
		if lim == "ssw" && v.Lease > 2 {
			t.Errorf("%s: lease %d 20 ms into a window whose previous one admitted the limit; want at most 2", lim, v.Lease)
		}
		// The cost it reports ahead counts now, where it was admitted.
		mustSync(t, c, batch("fast", 2, clk.now(), wire.Delta{Limiter: lim, Key: "k", Window: 1002, Delta: 3, Demand: 3}))
		c.withMerger(func(m *Merger) {
			st := m.keys[string(appendKeyStorageKey(nil, lim, "k"))]
			if cnt, prv := st.windowCounts(1001); cnt != 3 || prv != 100 {
				t.Errorf("%s: window 1001 counts %d, 1000 %d; want 3 (reported for 1002 by the fast clock), 100", lim, cnt, prv)
			}
		})
	}
}
