package merge

import (
	"math"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// How much a key's count varies from window to window.
//
// The strand model (strand.go) takes the fleet's demand in a window as
// Poisson about its pace. Real traffic is burstier: a web log at half its
// limit with single seconds at twice it fills those windows, and units
// held ahead there by isolates without a request in them strand. A
// sparse isolate's standing unit over several windows (spanWindows) is
// judged against what the key's windows have held: the mean and variance
// of its final counts, each window's count taken when it leaves the
// coordinator's two-window counter (late reports of it are in by then).

// spreadWeight is the weight of the newest window in the mean and
// variance (an exponentially weighted average over about 8 windows).
const spreadWeight = 1.0 / 8

// spreadMin is how many windows the spread rests on before it is used.
const spreadMin = 4

// noteRoll records, before the counter moves to window cw, the final
// counts of the windows it drops (a leased fixed window only): the
// previous window's when it moves one on, both when it moves further,
// and one empty window for the windows between (a key idle for a while
// is not read as a run of empty windows).
func (st *keyState) noteRoll(cw int64) {
	if cw <= st.win || !st.lim.Leased() || st.lim.Algorithm != wire.FixedWindow || st.win == 0 {
		return
	}
	st.noteWindowCount(st.prev)
	if cw > st.win+1 {
		st.noteWindowCount(st.count)
	}
	if cw > st.win+2 {
		st.noteWindowCount(0)
	}
}

// noteWindowCount adds one window's final count to the spread.
func (st *keyState) noteWindowCount(n int64) {
	x := float64(min(n, wire.MaxLimit))
	mean, v, k := st.spread()
	if k == 0 {
		st.setSpread(x, 0, 1)
		return
	}
	d := x - mean
	st.setSpread(mean+spreadWeight*d, (1-spreadWeight)*(v+spreadWeight*d*d), min(k+1, 255))
}

// spread returns the mean and variance of the key's count per window and
// how many windows they rest on (up to 255). A leased key keeps them in
// its isolate sketch, which only approximate keys use (a leased key's
// isolates are entries): no memory more per key. Not stored.
func (st *keyState) spread() (mean, variance float64, n uint64) {
	return math.Float64frombits(st.sk.cur[0]), math.Float64frombits(st.sk.cur[1]), st.sk.cur[2]
}

// setSpread sets what spread returns.
func (st *keyState) setSpread(mean, variance float64, n uint64) {
	st.sk.cur[0], st.sk.cur[1], st.sk.cur[2] = math.Float64bits(mean), math.Float64bits(variance), n
}

// windowDemand returns the demand a window of the key is expected to
// hold, given the fleet's pace (its isolates' demand per window): the
// larger of the pace and the windows' mean count, and its standard
// deviation, the larger of Poisson's and the windows' own.
func (st *keyState) windowDemand(pace float64) (mu, sd float64) {
	mu, v := pace, pace
	if mean, variance, n := st.spread(); n >= spreadMin {
		mu = max(mu, mean)
		v = max(mu, variance)
	}
	return mu, math.Sqrt(v)
}
