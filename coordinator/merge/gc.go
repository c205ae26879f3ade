package merge

import (
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// GC deletes, at time now, stored records that no longer matter, visiting at
// most budget records per call and resuming where the previous call stopped
// (a full pass over N records takes N/budget calls):
//
//   - key records whose state equals a fresh key: windowed keys whose newest
//     window is older than the previous window (now/period - 1) and bucket
//     keys whose bucket is full again (TAT <= now), with no isolate seen
//     within 2 periods; and records of limiters no longer configured;
//   - isolate high-water marks not updated for IsolateTTL.
//
// Keys currently cached are skipped (they are live). Deletes are staged for
// the next Commit. It returns the number of records staged for deletion.
func (m *Merger) GC(now int64, budget int) (int, error) {
	r, err := m.GCStep(now, budget)
	return r.Deleted, err
}

// GCResult is what one GC step did (Merger.GCStep).
type GCResult struct {
	// Visited is the number of stored records the step read, at most its
	// budget.
	Visited int
	// Deleted is the number of records it staged for deletion.
	Deleted int
	// PassDone reports that the step ended a pass: the next step starts
	// again at the first record.
	PassDone bool
}

// GCStep is GC, returning what the step did, so that a caller can pace
// the steps (the coordinator's GC loop runs them sooner while passes find
// garbage).
func (m *Merger) GCStep(now int64, budget int) (GCResult, error) {
	if budget <= 0 {
		return GCResult{}, nil
	}
	if err := m.recovered(); err != nil {
		return GCResult{}, err
	}
	deleted, visited := 0, 0
	prefix := []byte{prefixKey}
	if len(m.gcCursor) > 0 && m.gcCursor[0] == prefixHWM {
		prefix = []byte{prefixHWM}
	}
	var last []byte
	var st keyState
	var h hwmState
	err := m.store.Scan(prefix, m.gcCursor, func(k, v []byte) bool {
		visited++
		last = append(last[:0], k...)
		if visited > budget {
			return false
		}
		del := false
		switch prefix[0] {
		case prefixKey:
			if _, cached := m.keys[string(k)]; cached {
				break
			}
			name, _, ok := splitKeyStorageKey(k)
			lim := m.lims[name]
			if !ok || lim == nil {
				// A limiter no longer configured: kept for OrphanGrace
				// from this configuration's first GC, so that one
				// removed by mistake and restored keeps its counts
				// (deleted 2 s after a start without it, a day's
				// quota started again).
				if m.gcStart == 0 {
					m.gcStart = now
				}
				del = now-m.gcStart >= int64(m.opts.OrphanGrace)
				break
			}
			st = keyState{lim: lim}
			if st.decode(v, m.opts.MaxIsolatesPerKey) != nil {
				break // keep what we cannot read; Apply reports it
			}
			del = m.expired(&st, now)
		case prefixHWM:
			id := string(k[1:])
			if hh, cached := m.hwms[id]; cached && (hh.dirty || hh.gen > m.ckptDone) {
				break // the record is older than the cached state
			}
			if h.decode(v) == nil && h.seen < now-int64(m.opts.IsolateTTL) {
				del = true
				delete(m.hwms, id)
			}
		}
		if del {
			if prefix[0] == prefixKey {
				m.residentStale(k)
			}
			m.deletes = append(m.deletes, append([]byte(nil), k...))
			deleted++
		}
		return true
	})
	if err != nil {
		return GCResult{}, err
	}
	r := GCResult{Visited: min(visited, budget), Deleted: deleted}
	switch {
	case visited > budget:
		m.gcCursor = last // resume at the first key not visited
	case prefix[0] == prefixKey:
		m.gcCursor = []byte{prefixHWM}
	default:
		m.gcCursor = nil
		r.PassDone = true
	}
	m.stats.GCDeleted += int64(deleted)
	return r, nil
}

// expired reports whether st is equivalent to a fresh key at time now.
func (m *Merger) expired(st *keyState, now int64) bool {
	P := st.lim.Period
	if st.upActive(now) {
		return false
	}
	for i := range st.isos {
		if st.isos[i].seen >= now-2*P {
			return false
		}
	}
	if st.lim.IsBucket() {
		return st.tat <= now
	}
	return st.win < limitmath.Window(now, P)-1 || aheadOfConfig(st, now)
}

var _ = wire.Version
