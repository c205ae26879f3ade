package merge

import (
	"github.com/edgelimit/edgelimit/wasm/limitmath"
)

// The cache of key states and high-water marks, and its eviction.

func (m *Merger) dropCache() {
	m.residentDropAll()
	m.keys, m.keyWeight = map[string]*keyState{}, 0
	m.hwms = map[string]*hwmState{}
	m.isoEntries = 0
}

// evict trims the caches to 7/8 of their caps, dropping only states whose
// last change is checkpointed (in its own record, so a later read of the
// record is current).
func (m *Merger) evict() {
	// A pass that stopped short of the target found nothing more to evict;
	// until a checkpoint lands, another would only scan the same states.
	if m.keyWeight > m.opts.MaxCachedKeys && m.evictStuck != m.ckptDone {
		target := m.opts.MaxCachedKeys - m.opts.MaxCachedKeys/8
		var seq int64
		if m.res != nil {
			seq = m.res.seq.Add(1)
		}
		for k, st := range m.keys {
			if m.keyWeight <= target {
				break
			}
			if st.dirty || st.gen > m.ckptDone {
				continue
			}
			m.isoEntries -= len(st.isos)
			m.keyWeight -= cacheWeight(k)
			delete(m.keys, k)
			m.residentEvicted(st, seq)
		}
		m.evictStuck = -1
		if m.keyWeight > target {
			m.evictStuck = m.ckptDone
		}
	}
	if len(m.hwms) > m.opts.MaxCachedIsolates {
		target := m.opts.MaxCachedIsolates - m.opts.MaxCachedIsolates/8
		for k, h := range m.hwms {
			if len(m.hwms) <= target {
				break
			}
			if h.dirty || h.gen > m.ckptDone {
				continue
			}
			delete(m.hwms, k)
		}
	}
}

// cacheKey puts st in the cache under its storage key skey.
func (m *Merger) cacheKey(skey string, st *keyState) {
	if _, ok := m.keys[skey]; !ok {
		m.keyWeight += cacheWeight(skey)
	}
	m.keys[skey] = st
}

// cacheWeight is how many key states a cached key counts for against
// MaxCachedKeys: 1, and one more per 100 bytes of its storage key. A key
// state takes about 500 bytes of heap with a short key and about 1.4 KB
// with a key of 256 bytes (the key is held in the map, the state and the
// log). Counted alike, a flood of 256-byte keys at --max-memory 128MiB
// reached 181 MiB of RSS; weighed, 163-173 MiB in three runs (most of the
// rest is outside the cache: BenchmarkKeyFloodHTTP,
// EDGELIMIT_FLOOD_KEY_BYTES).
func cacheWeight(skey string) int { return 1 + len(skey)/100 }

// CachedKeys returns the number of key states in memory.
func (m *Merger) CachedKeys() int { return len(m.keys) }

// LeasesOutstanding returns the sum of the active strict leases of the
// cached keys at time now, in cost units.
func (m *Merger) LeasesOutstanding(now int64) int64 {
	var sum int64
	for _, st := range m.keys {
		if !st.lim.Leased() {
			continue
		}
		w := max(limitmath.Window(now, st.lim.Period), st.win)
		for i := range st.isos {
			sum = addSat(sum, st.reservation(&st.isos[i], w, now))
		}
	}
	return sum
}
