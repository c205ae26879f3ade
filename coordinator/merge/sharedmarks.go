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
// bucket or GCRA entry, re-applied, would be charged again however late:
// its mark lives bucketMarkTTL (at most the isolate's TTL), the horizon of
// a retry of a batch some of whose parts were written before its
// coordinator failed (its isolate retries at once on another, or within
// its 30 s backoff). A retry later than that charges the part's cost
// twice: more spent than was, never more admitted. It lived the isolate's
// TTL (a day) before, and one token's marks in every bucket under new
// isolate ids held Redis memory for as long.

// bucketMarkTTL is how long the mark of a part with a bucket entry lives:
// 1 h (ns).
const bucketMarkTTL = int64(3600e9)

// sharedMarkTTL returns the TTL (ns) of the mark of a part with entries,
// written at now: at most isolateTTL.
func (m *Merger) sharedMarkTTL(entries []wire.Delta, now, isolateTTL int64) int64 {
	var ttl int64
	for i := range entries {
		lim := m.lims[entries[i].Limiter]
		if lim == nil {
			return isolateTTL
		}
		if lim.IsBucket() {
			return min(bucketMarkTTL, isolateTTL)
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
