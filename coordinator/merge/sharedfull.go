package merge

import (
	"sync"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
)

// Full-window notices in shared mode (fullnotice.go). A SharedMerger's
// Mergers live for one group, so the SharedMerger keeps the log itself:
// each key of an answered batch whose view shows its current window at
// its limit (the view's count; the units of expired leases are not in a
// view) is logged once per window, and each reply carries what was logged
// since the isolate's last reply from this coordinator. An isolate that
// syncs with several coordinators hears of what each of them saw.

// maxSharedFullTracked bounds the isolates' places and the key-windows
// logged that a SharedMerger remembers; past it both are forgotten (an
// isolate then hears again of the windows still current, at most
// maxFullViews).
const maxSharedFullTracked = 1 << 16

// sharedFull is a SharedMerger's log of full key-windows.
type sharedFull struct {
	mu   sync.Mutex
	log  fullLog
	seen map[string]int64 // isolate (scope + id) -> the newest notice told
	wins map[string]int64 // limiter, 0, key -> 1 + the window logged
}

// notices logs the full key-windows of r's reply and appends the notices
// r's isolate has not been told (m: the group's Merger, for the limits in
// force).
func (s *SharedMerger) notices(m *Merger, r *sharedReq, now int64) {
	if s.opts.NoFullNotices || r.rp == nil {
		return
	}
	f := &s.full
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil || len(f.seen) >= maxSharedFullTracked {
		f.seen = map[string]int64{}
	}
	if f.wins == nil || len(f.wins) >= maxSharedFullTracked {
		f.wins = map[string]int64{}
	}
	n := len(r.rp.Entries)
	inBatch := make(map[[2]string]bool, n)
	for i := 0; i < n; i++ {
		v := &r.rp.Entries[i]
		inBatch[[2]string{v.Limiter, v.Key}] = true
		lim := m.lims[v.Limiter]
		if lim == nil || lim.IsBucket() || v.Window != limitmath.Window(now, lim.Period) {
			continue
		}
		limit := lim.LimitFor(v.Key)
		if v.Count < limit {
			continue
		}
		k := lim.Name + "\x00" + v.Key
		if f.wins[k] == v.Window+1 {
			continue
		}
		f.wins[k] = v.Window + 1
		f.log.add(fullEnt{lim: lim, key: v.Key, win: v.Window, count: v.Count, prev: v.Prev, limit: limit,
			isolates: max(v.Isolates, 1)})
	}
	skip := func(e *fullEnt) bool { return inBatch[[2]string{e.lim.Name, e.key}] }
	f.seen[r.iso] = f.log.appendViews(r.rp, f.seen[r.iso], skip, r.b.Limits, now)
}
