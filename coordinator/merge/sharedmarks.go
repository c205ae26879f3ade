package merge

import "github.com/edgelimit/edgelimit/wasm/wire"

// How long an isolate's mark in a bucket lives (shared mode, shared.go).
// A mark stops a batch's part from being applied twice in its bucket, and
// is needed only until the isolate's high-water mark passes the batch
// (after that, checkSeq answers a retry as a duplicate or refuses it) or
// until re-applying the part would change nothing: a windowed entry of
// window w is dropped as stale once window w+1 has ended. So a part of
// windowed entries only keeps its mark until its newest window is older
// than the previous one, plus one period and sharedTTLMargin, as the
// key records themselves (sharedTTL): with 1-second limiters a mark lives
// about a minute after the isolate's last sync there, not a day, and
// isolates that churn leave nothing behind for long. A part with a token
// bucket or GCRA entry (re-applied, it would be charged again however
// late) keeps the isolate's TTL (MergerOptions.IsolateTTL), as its
// high-water mark does.

// sharedMarkTTL returns the TTL (ns) of the mark of a part with entries,
// written at now: at most isolateTTL.
func (m *Merger) sharedMarkTTL(entries []wire.Delta, now, isolateTTL int64) int64 {
	var ttl int64
	for i := range entries {
		lim := m.lims[entries[i].Limiter]
		if lim == nil || lim.IsBucket() {
			return isolateTTL
		}
		P := lim.Period
		until := addSat(entries[i].Window, 2) * P // window w+1 has ended: w is stale
		ttl = max(ttl, addSat(max(until-now, 0), addSat(P, sharedTTLMargin)))
	}
	if ttl == 0 { // no entries: nothing says how long the mark matters
		return isolateTTL
	}
	return min(ttl, isolateTTL)
}
