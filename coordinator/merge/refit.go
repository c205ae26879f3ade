package merge

import (
	"github.com/edgelimit/edgelimit/wasm/limitmath"
)

// Records read back under another configuration. A key record holds
// window indexes and a bucket's TAT in units of the period it was written
// under, not the period itself. After a limiter's period changed (its
// configuration, then a restart), a record of a 1 m window read as a 1 h
// one named a window about 3,400 years ahead: every delta of the key was
// then older than its window, dropped as stale (11,100 acknowledged, 0
// counted), and its edges admitted everything; a bucket shortened from
// 1 h to 1 s denied for the hour its old TAT stood ahead. So a record is
// fitted to its limiter when read (refit): windows past the next one (no
// clock skew an edge may have reaches them) are started again, counts and
// the leases for them with them; a TAT past what the bucket can owe is
// brought back to it (a bucket that admitted up to its burst now). The
// counts of a changed period start again, as they would for a new
// limiter: what was counted under the old period says nothing of the new
// one's windows.

// refit fits st, just read from the store for key, to its limiter at now
// and reports whether it changed anything (counted in
// MergeStats.RecordsRefit).
func (m *Merger) refit(st *keyState, key string, now int64) bool {
	lim := st.lim
	if lim.IsBucket() {
		// What the bucket can owe, as applyDelta caps it: its burst's
		// refill time leased, refillsAhead approximate.
		limit := max(st.limitFor(key, now), 1)
		reach := addSat(now, refillsAhead(lim, limit))
		if lim.Leased() {
			reach = addSat(now, limitmath.MulDiv(lim.EffectiveBurst(limit), lim.Period, limit))
		}
		if st.tat <= reach {
			return false
		}
		st.tat = reach
		m.stats.RecordsRefit++
		return true
	}
	if !aheadOfConfig(st, now) {
		return false
	}
	next := limitmath.Window(now, lim.Period) + 1
	st.win, st.count, st.prev = 0, 0, 0
	for i := range st.isos {
		is := &st.isos[i]
		if is.leaseWin > next {
			is.leaseWin, is.lease, is.granted, is.prevRes = 0, 0, 0, 0
		}
		if is.standUntil > next {
			is.stand, is.standRes, is.standUntil = 0, 0, 0
		}
	}
	m.stats.RecordsRefit++
	return true
}

// aheadOfConfig reports whether the windowed record st names a window past
// the next one at now: written under another period (see refit).
func aheadOfConfig(st *keyState, now int64) bool {
	return !st.lim.IsBucket() && st.win > limitmath.Window(now, st.lim.Period)+1
}
