package merge

import (
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Full-window notices. A key whose window has counted its whole limit
// denies every request until the window ends, but an isolate learns that
// only from a view of the key: one that has not synced the key since (at
// sparse density, most of them) holds its next request for a lease, asks,
// and is refused a round trip later, and under a long window (a quota per
// inbox) every isolate does so once per key. So the Merger logs each
// key-window whose count reaches its limit, and every reply carries, after
// the views of its batch's keys, a view of each window logged since the
// isolate's last reply that is still the current one (at most
// maxFullViews): the module keeps such a view even for a key it does not
// hold (wasm/core, syncIn) and denies the key locally, without waiting,
// until the window ends. Only what cannot come back in the window is
// noticed: its count, and the units of expired leases, which stay
// reserved as spent for the window they were alive in; never what live
// leases reserve (their holders may report them unused). So the notice
// denies no request the window could still admit, but for one case: a
// graceful stop (wire.Batch.End) gives back an expired lease's unused
// units too. A reset reaches the isolates as before (resetlog.go). The
// view's Count is that spent total.
//
// Each isolate hears only of the limiters its batches named (since the
// coordinator loaded its high-water mark): a module refuses a view of a
// limiter it does not run (one older than notices refuses the whole
// reply). A reset or a notice of a key (resetlog.go: a pause lifted, a
// limit changed) takes the key's entries out of the log, so no isolate is
// told after it that the window is full; a change of the limits in force
// empties the log.
//
// The log and each isolate's place in it are kept in memory: a restart,
// or an isolate whose high-water mark was evicted from the cache, hears
// again of the windows still current (at most maxFullViews). Coordinators
// that share a Redis Cluster send no notices: a reset made through
// another coordinator would not take the key out of this one's log.

// maxFullLog is how many key-windows the log remembers at least (at most
// twice that, about 100 bytes each); maxFullViews bounds the notices one
// reply carries.
const (
	maxFullLog   = 4096
	maxFullViews = 256
)

// fullLog is the Merger's log of key-windows that reached their limit,
// oldest first.
type fullLog struct {
	seq  int64 // of the newest entry; 0: none yet
	ents []fullEnt
	// newest: storage key -> the seq of its newest entry in ents; gone:
	// storage key -> the newest seq when the key was reset or noticed,
	// its entries up to it are not told. Both hold only keys in ents.
	newest, gone map[string]int64
}

type fullEnt struct {
	seq              int64
	st               *keyState // the key's state when logged (to tell it among a batch's keys)
	lim              *wire.LimiterConfig
	key              string
	win, count, prev int64
	limit            int64
	isolates         int64
}

// noteFull logs slot s's key when its current window has counted its
// limit, once per window (keyState.fullWin); v is the key's view in the
// reply (the expired leases' units are summed only when it says the
// window has nothing free).
func (m *Merger) noteFull(s *slot, v *wire.View, now int64) {
	st := s.st
	if m.opts.NoFullNotices || st.lim.IsBucket() {
		return
	}
	W := max(limitmath.Window(now, st.lim.Period), st.win)
	if st.fullWin == W+1 {
		return
	}
	count, prev := st.windowCounts(W)
	limit := st.limitFor(s.key, now)
	if count < limit && st.lim.Leased() && v.Exhausted {
		// Units in expired leases stay reserved, as spent, for the
		// window they were alive in (reservation): they never come back
		// in W either.
		count = addSat(count, st.spentIn(W, now))
	}
	if count < limit {
		return
	}
	st.fullWin = W + 1
	m.full.add(fullEnt{st: st, lim: st.lim, key: s.key, win: W, count: count, prev: prev,
		limit: limit, isolates: max(st.recentIsolates(now), 1)})
}

// add logs f (its seq is set here).
func (l *fullLog) add(f fullEnt) {
	l.seq++
	f.seq = l.seq
	l.ents = append(l.ents, f)
	if l.newest == nil {
		l.newest = map[string]int64{}
	}
	l.newest[f.st.skey] = f.seq
	if len(l.ents) >= 2*maxFullLog { // the newest maxFullLog stay (a copy per maxFullLog added)
		l.ents = append(l.ents[:0], l.ents[len(l.ents)-maxFullLog:]...)
		first := l.ents[0].seq
		for k, q := range l.newest {
			if q < first {
				delete(l.newest, k)
				delete(l.gone, k)
			}
		}
	}
}

// spentIn returns the units of W that expired leases keep reserved, as
// spent (reservation).
func (st *keyState) spentIn(W, now int64) int64 {
	var n int64
	for i := range st.isos {
		is := &st.isos[i]
		if is.expires != 0 && now >= is.expires {
			n = addSat(n, st.reservation(is, W, now))
		}
	}
	return n
}

// addFullViews appends to rp the notices h has not been told, newest
// first, of windows still current at now, skipping the keys of the batch
// (their views are in rp, mark: the batch's Apply), within maxFullViews
// and what a reply may hold. limits: the batch asked for the
// coordinator's limits (wire.Batch.Limits).
func (m *Merger) addFullViews(rp *wire.Reply, h *hwmState, mark int64, limits bool, now int64) {
	if m.opts.NoFullNotices {
		return
	}
	skip := func(f *fullEnt) bool { return f.st.mark == mark || !h.named(f.lim) }
	h.fullSeen = m.full.appendViews(rp, h.fullSeen, skip, limits, now)
}

// forgetFull takes (limiter, key) out of the log: it was reset, or its
// isolates were told to drop what they cached of it (Notice).
func (m *Merger) forgetFull(limiter, key string) {
	l := &m.full
	m.buf = appendKeyStorageKey(m.buf[:0], limiter, key)
	if st, ok := m.keys[string(m.buf)]; ok {
		st.fullWin = 0
	}
	if _, ok := l.newest[string(m.buf)]; !ok {
		return // not in the log
	}
	if l.gone == nil {
		l.gone = map[string]int64{}
	}
	l.gone[string(m.buf)] = l.seq
}

// forgetAllFull empties the log when the limits in force change (a window
// full under the old limits may not be under the new): the isolates get a
// reset notice (resetlog.go) of every key in it, so those told it was full
// drop that; its numbering goes on, so that the isolates' places in it stay
// valid.
func (m *Merger) forgetAllFull() {
	for i := range m.full.ents {
		f := &m.full.ents[i]
		if m.full.newest[f.st.skey] == f.seq && m.full.gone[f.st.skey] < f.seq {
			m.resets.add(f.lim.Name, f.key, 0)
		}
	}
	m.full = fullLog{seq: m.full.seq}
	for _, st := range m.keys {
		st.fullWin = 0
	}
}

// named reports whether the isolate of h named lim in a batch since the
// coordinator loaded h (fullnotice.go: it hears only of those).
func (h *hwmState) named(lim *wire.LimiterConfig) bool {
	for _, l := range h.lims {
		if l == lim {
			return true
		}
	}
	return false
}

// name notes that the isolate of h named lim in a batch; a limiter new to
// it takes it back to the start of the log (what was skipped for it is
// told now, as far as still current).
func (h *hwmState) name(lim *wire.LimiterConfig) {
	if !h.named(lim) {
		h.lims = append(h.lims, lim)
		h.fullSeen = 0
	}
}

// appendViews appends to rp the entries logged after from, newest first,
// of windows still current at now and not skipped, within maxFullViews and
// what a reply may hold; it returns the newest entry's seq (the isolate's
// new place in the log).
func (l *fullLog) appendViews(rp *wire.Reply, from int64, skip func(*fullEnt) bool, limits bool, now int64) int64 {
	room := min(maxFullViews, wire.MaxBatchEntries-len(rp.Entries))
	for i := len(l.ents) - 1; i >= 0 && room > 0 && l.ents[i].seq > from; i-- {
		f := &l.ents[i]
		if limitmath.Window(now, f.lim.Period) != f.win || skip(f) || l.gone[f.st.skey] >= f.seq {
			continue
		}
		v := wire.View{Limiter: f.lim.Name, Key: f.key, Window: f.win, Count: f.count, Prev: f.prev,
			Isolates: f.isolates, Lease: -1, Exhausted: true}
		// Bounded as every view (viewbound.go): one client's cost of 2^40
		// on a key of its own had every isolate of the limiter refuse
		// every reply carrying its notice.
		boundView(&v, f.lim, f.limit, now)
		if limits {
			v.Limit = f.limit
		}
		rp.Entries = append(rp.Entries, v)
		room--
	}
	return l.seq
}
