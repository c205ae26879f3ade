package merge

import "github.com/edgelimit/edgelimit/wasm/limitmath"

// Whether an isolate with a request in a window has one in the next,
// pooled over the key's isolates.
//
// A sparse isolate's standing unit for window W+1 (lease.go) is used only
// if the isolate gets a request in W+1; the model (strand.go) judged the
// chance of none from the isolate's own pace, demand over its gap between
// batches. That pace rests on a few gaps, and the units go to the isolates
// whose estimate happens to be high, so the estimates the units were
// granted on were high by selection: at zipf-1000's keys over the limit
// (0.5-1.7 requests per isolate per window) standing units were granted on
// paces of 2-4 per window. In a traced run (seed 1, each unit's expected
// unused against what was unused when its window ended), 634 units were
// granted at an expected 0.2 or less unused each, 75 expected unused in
// all; 386 were (of all 2,323 units, 846 expected, 1,713 unused). The
// key's isolates together answer the question without that selection: of
// the isolates with a request in a window, the share with none in the next
// (stopShare). A standing unit is expected unused at least at that share
// (same run: 88 units at 0.2 or less, 10 expected unused, 12 were; of all
// 1,843, 1,345 expected, 1,384 unused).
//
// Each isolate's last window with a request (isoState.reqAfter) gives one
// observation when its next request comes (in the next window: it went on;
// later: it stopped) or when its entry is dropped (it stopped). The counts
// decay by half per window, so they follow the key's current traffic.

// noteRequest records, at now, that is had a request in window w (it
// asked for cost there, or reported cost admitted there), and the
// observation it makes of its previous window with one. A window past the
// coordinator's next (an isolate's clock far ahead) observes nothing.
func (st *keyState) noteRequest(is *isoState, w, now int64) {
	W := limitmath.Window(now, st.lim.Period)
	switch {
	case w > W+1:
		return
	case is.reqAfter == 0:
	case w == is.reqAfter:
		st.carried(false, W)
	case w > is.reqAfter:
		st.carried(true, W)
	default:
		return // the same window, or an older one reported late
	}
	is.reqAfter = w + 1
}

// noteDropped records the observation an entry dropped at now makes: its
// last window with a request had none after it.
func (st *keyState) noteDropped(is *isoState, now int64) {
	if is.reqAfter != 0 {
		st.carried(true, limitmath.Window(now, st.lim.Period))
	}
}

// carried adds one observation at window W: an isolate with a request in a
// window had none in the next (stopped) or had one.
func (st *keyState) carried(stopped bool, W int64) {
	st.decayCarry(W)
	st.carryN++
	if stopped {
		st.carryStop++
	}
}

// decayCarry halves the counts once per window from their window to W.
func (st *keyState) decayCarry(W int64) {
	if W <= st.carryWin {
		return
	}
	if d := W - st.carryWin; d >= 32 {
		st.carryN, st.carryStop = 0, 0
	} else {
		f := 1 / float32(uint32(1)<<uint(d))
		st.carryN, st.carryStop = st.carryN*f, st.carryStop*f
	}
	st.carryWin = W
}

// stopShare returns, at now, the expected share of the key's isolates with
// a request in a window that have none in the next: the observed share
// under a Jeffreys prior (1/2 with no observation).
func (st *keyState) stopShare(now int64) float64 {
	st.decayCarry(limitmath.Window(now, st.lim.Period))
	return (float64(st.carryStop) + 0.5) / (float64(st.carryN) + 1)
}

// stopFloor returns, at now, the least share of a sparse standing unit
// expected unused: stopShare once the key has an observation's weight, 0
// before, when the isolate's own pace alone judges the unit. The counts
// are not stored: a key read again from the store (evicted, a restart, or
// every group on coordinators that share a Redis Cluster) starts without
// them, and the prior's 1/2 alone would count every such unit half unused.
func (st *keyState) stopFloor(now int64) float64 {
	if st.decayCarry(limitmath.Window(now, st.lim.Period)); st.carryN < 1 {
		return 0
	}
	return st.stopShare(now)
}

// standUnused returns, at now, the units of is's standing lease rn for
// window win (the key's next) expected unused, for an isolate asking lam
// per window: its own pace's estimate (strand.go), and for a sparse
// standing unit at least the share of the key's isolates that stop
// (stopFloor).
func (st *keyState) standUnused(is *isoState, rn int64, lam float64, win, now int64) float64 {
	P := st.lim.Period
	c := st.costUnit()
	u := unusedCost(rn, lam*standShare(is, win, P), is.evidence(P), c)
	if rn == c && lam < busyPerWindow*float64(c) {
		u = max(u, float64(c)*st.stopFloor(now))
	}
	return u
}
