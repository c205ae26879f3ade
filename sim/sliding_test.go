package sim

import (
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A sliding window's overrun is measured on its weighted count: 100
// admitted late in one window and 50 early in the next keep each fixed
// window within a limit of 100, and pass the sliding count (50 plus 90%
// of 100) by 40.
func TestSlidingOverrunIsWeighted(t *testing.T) {
	const P = int64(time.Second)
	for _, sliding := range []bool{true, false} {
		alg := wire.FixedWindow
		if sliding {
			alg = wire.SlidingWindow
		}
		e := &engine{cfg: wire.Config{Limiters: []wire.LimiterConfig{{Name: "api", Algorithm: alg, Limit: 100, Period: P}}},
			keys:  []keyInfo{{name: "k", cap: 100, period: P, sliding: sliding}},
			truth: []truth{{win: -1, spent: -1}}}
		admit := func(at, n int64) {
			e.rollWindow(0, at)
			for range n {
				e.truth[0].offered++
				e.record(0, at, 1, true, 0)
			}
		}
		admit(P*9/10, 100)
		admit(P+P/10, 50)
		e.flush(0)
		want := int64(0)
		if sliding {
			want = 40
		}
		if e.res.WorstOverrun != want || sliding && e.res.OverWindows != 1 {
			t.Errorf("sliding %v: worst window %d over in %d windows, want %d", sliding, e.res.WorstOverrun, e.res.OverWindows, want)
		}
	}
}

// The default mode keeps a sliding window's weighted count within its
// limit, at 3x and 10x the limit over 64 isolates on a jittery network:
// a lease granted early in a window counts what the previous window's
// leases may hold unreported (coordinator/merge, usedIn and notePrev).
// Before, the same runs had 2-4 units over the limit of 100 in about one
// window in five (seed 1, 60 s: 12 and 23 windows).
func TestSlidingWindowWeightedCountWithinLimit(t *testing.T) {
	for _, rate := range []float64{300, 1000} {
		sc := small(t, 64, 100, rate, "poisson", 15*time.Second)
		sc.Config.Limiters[0].Algorithm = wire.SlidingWindow
		sc.Locations = 4
		sc.Network.Latency = Latency{Dist: "lognormal", Mean: Duration(20 * time.Millisecond), Sigma: 0.6}
		for _, strategy := range []string{Auto, Central} {
			r := runScenario(t, sc, strategy)
			if r.WorstOverrun != 0 {
				t.Errorf("%s at %.0f/s: %d windows over the weighted count, worst by %d", strategy, rate, r.OverWindows, r.WorstOverrun)
			}
			t.Logf("%s at %.0f/s: utilisation %.1f%%, stranded %.2f%%, waited %.1f%%", strategy, rate, r.Utilisation, r.StrandedPct, r.WaitedPct)
			// (Not a utilisation target: auto reaches 94-96% on sliding
			// windows at 3x, before this rule and after.)
			if strategy == Auto && r.Utilisation < 90 {
				t.Errorf("auto at %.0f/s: utilisation %.1f%%", rate, r.Utilisation)
			}
		}
	}
}

// A sliding window with a small limit is served, not halved: the
// coordinator weighs the previous window's share rounded down, as the
// module and this measure do. Rounded up, the last window's units weighed
// a whole unit each through the next window: a limit of 1 admitted in
// every other window (50%), a limit of 3 at 10x over 4 isolates 66.7%
// (seeds 1-3, 60 s; 100% and 98.0% after).
func TestSlidingSmallLimitsServed(t *testing.T) {
	for _, limit := range []int64{1, 3} {
		sc := small(t, 4, limit, float64(10*limit), "poisson", 20*time.Second)
		sc.Config.Limiters[0].Algorithm = wire.SlidingWindow
		sc.Locations = 2
		r := runScenario(t, sc, Auto)
		t.Logf("limit %d at 10x: utilisation %.1f%%, worst window %d over", limit, r.Utilisation, r.WorstOverrun)
		if r.WorstOverrun != 0 || r.Utilisation < 90 {
			t.Errorf("limit %d at 10x: utilisation %.1f%%, %d windows over (worst by %d)", limit, r.Utilisation, r.OverWindows, r.WorstOverrun)
		}
	}
}
