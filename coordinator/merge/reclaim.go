package merge

import "github.com/edgelimit/edgelimit/wasm/limitmath"

// Reclaiming a key's entries. A key keeps at most
// MergerOptions.MaxIsolatesPerKey isolates (256 by default), and an entry
// holding an active lease is never simply dropped: its reservation must
// go on counting against the key's budget. Without more, one client could
// fill every entry of a key with leases of one unit (256 isolate ids,
// one sync each) and every other isolate would get no lease, so no
// admission, for the rest of the window (a fixed window of 1000/h: 0
// leases granted for the hour with 744 units free; TestLeasesCannotFillAKey).
//
// So when a new isolate finds no entry free, the entry with the smallest
// reservation now is charged and given up: its reservation is counted as
// spent (windowed: added to the count of its window; buckets: the bucket
// is drawn by it at the end of the lease's life, as chargeExpired does),
// its lease and standing lease are dropped, and the new isolate takes the
// entry. The key's count plus its reservations is unchanged, so no more is
// granted than before; the evicted isolate may still admit under the
// lease it was told, and what it then reports is counted a second time
// (the safe side, as for an expired bucket lease). An entry holding a
// standing lease for the next window is not taken (that window has no
// count to charge it to yet); when every entry holds one, the new isolate
// gets no lease, as before.

// reclaim charges and gives up the entry of st (the state of key) with the
// smallest reservation in window active at now (ties: the least recently
// seen), so iso can take it; false when none may be taken.
func (m *Merger) reclaim(st *keyState, key string, active, now int64) bool {
	if !st.lim.Leased() {
		return false
	}
	bucket := st.lim.IsBucket()
	victim := -1
	var least int64
	for i := range st.isos {
		is := &st.isos[i]
		if !bucket && st.reservation(is, active+1, now) > 0 {
			continue
		}
		r := st.reservation(is, active, now)
		if victim < 0 || r < least || r == least && is.seen < st.isos[victim].seen {
			victim, least = i, r
		}
	}
	if victim < 0 {
		return false
	}
	is := &st.isos[victim]
	if least > 0 {
		if bucket {
			st.tat = limitmath.AdvanceTAT(st.tat, max(now, is.expires), least, st.lim.Period, st.limitFor(key, now))
		} else {
			st.win, st.count, st.prev = limitmath.Roll(st.win, st.count, st.prev, active)
			st.count = addSat(st.count, least)
		}
	}
	m.release(is, now) // now the one entry without an active lease: st.iso takes it
	m.stats.LeasesReclaimed++
	m.markKey(st)
	return true
}
