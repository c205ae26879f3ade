package merge

import (
	"bytes"
	"hash/maphash"
	"slices"
	"sync/atomic"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Prefetching cold keys.
//
// A key's first touch (or its first touch after eviction) reads its record
// from the Store. Done by the committer, those reads serialize every
// request behind one goroutine; Prefetch lets the request goroutines do them
// beforehand, in parallel, without holding the Merger.
//
// A prefetched value is only used when it is still what the Store holds
// for a key that is not cached. The value of an uncached key only changes
// when a cached state is committed and then evicted (or the cache dropped),
// or when GC deletes it; each of those stamps the key's slot (a hash of the
// storage key) with a new eviction sequence number. Prefetch reads the
// sequence number before its Gets, and the committer trusts a prefetched
// value only when the key's slot was not stamped after that (otherwise it
// reads the Store itself, as without prefetching). A per-slot count of cached
// keys lets Prefetch skip the keys that are (probably) cached.

// ConcurrentStore is implemented by Stores whose Get may run concurrently
// with every other method (pebblestore.Store). Coordinator prefetches cold keys
// from the request goroutines only on such a Store.
type ConcurrentStore interface {
	Store
	// ConcurrentGet reports whether Get is safe to call concurrently.
	ConcurrentGet() bool
}

// SortedGetter is implemented by Stores that read many keys at once more
// cheaply than one Get each (pebblestore.Store: one iterator). GetSorted
// reads keys, given in ascending order, and calls fn with each key's index,
// its value (valid only during the call) and whether it was found; it is
// safe concurrently as ConcurrentStore's Get is.
type SortedGetter interface {
	GetSorted(keys [][]byte, fn func(i int, value []byte, found bool)) error
}

// residency tracks, per slot of the storage-key hash, how many keys are
// cached and when a key was last evicted.
type residency struct {
	seed   maphash.Seed
	mask   uint64
	cached []atomic.Int32 // keys cached per slot; read by prefetchers
	gen    []int64        // eviction sequence number of the slot's last eviction; committer only
	seq    atomic.Int64   // eviction sequence number; written by the committer only
	abort  int64          // seq of the last dropCache: older prefetches are all stale
}

// newResidency sizes the slots at 8 per cached key (up to 2^24; 12 bytes
// each, 96 bytes per cached key): a key whose slot holds a cached key is
// not prefetched but read by the committer, one at a time, so the share of
// slots taken (about 1 in 9 when the cache is full, 4 in 10 with 2 slots
// per key) is the share of a flood's new keys read serially.
func newResidency(maxCached int) *residency {
	n := 1 << 16
	for n < 8*maxCached && n < 1<<24 {
		n <<= 1
	}
	return &residency{seed: maphash.MakeSeed(), mask: uint64(n - 1),
		cached: make([]atomic.Int32, n), gen: make([]int64, n)}
}

func (r *residency) slot(skey []byte) uint64 { return maphash.Bytes(r.seed, skey) & r.mask }

func (r *residency) slotString(skey string) uint64 { return maphash.String(r.seed, skey) & r.mask }

// EnablePrefetch makes Prefetch available (it is a no-op before). Call it
// before the first Apply, only when the Store's Get is safe concurrently.
func (m *Merger) EnablePrefetch() {
	if m.res == nil {
		m.res = newResidency(m.opts.MaxCachedKeys)
	}
}

// Prefetched holds the Store records read by Prefetch for one batch.
type Prefetched struct {
	seq  int64 // eviction sequence number before the reads
	ents []prefetchedKey
}

type prefetchedKey struct {
	slot  uint64
	value []byte
	found bool
	read  bool // value/found were read
}

// Prefetch reads from the Store the records of b's keys that are probably
// not cached, for ApplyPrefetched. It is safe to call concurrently with
// every method of m (it only reads the configuration, atomics and the
// Store) once EnablePrefetch was called; it returns nil when prefetching is
// off or nothing had to be read. A read error is ignored (the committer
// reads again and reports it).
func (m *Merger) Prefetch(b *wire.Batch) *Prefetched {
	r := m.res
	if r == nil {
		return nil
	}
	var pf *Prefetched
	sg, many := m.store.(SortedGetter)
	n := prefetchItems(b)
	many = many && n > 1
	var skeys [][]byte // with many: the storage keys to read, with their items in idx
	var idx []int
	var buf [2 + 255 + wire.MaxKeyLen]byte
	for i := range n {
		lim, key := m.prefetchItem(b, i)
		if lim == nil {
			if i < len(b.Entries) {
				return nil // the batch is refused
			}
			continue // an ask or signal the merge skips
		}
		sk := appendKeyStorageKey(buf[:0], lim.Name, key)
		s := r.slot(sk)
		if r.cached[s].Load() > 0 {
			continue
		}
		if pf == nil {
			pf = &Prefetched{seq: r.seq.Load(), ents: make([]prefetchedKey, n)}
		}
		pf.ents[i].slot = s
		if many {
			skeys, idx = append(skeys, append([]byte(nil), sk...)), append(idx, i)
			continue
		}
		v, found, err := m.store.Get(sk)
		if err != nil {
			continue
		}
		pf.ents[i] = prefetchedKey{slot: s, value: v, found: found, read: true}
	}
	if len(skeys) > 0 {
		order := make([]int, len(skeys))
		for j := range order {
			order[j] = j
		}
		slices.SortFunc(order, func(a, b int) int { return bytes.Compare(skeys[a], skeys[b]) })
		sorted := make([][]byte, len(order))
		for j, o := range order {
			sorted[j] = skeys[o]
		}
		// A read error leaves the entries unread: the committer reads them.
		sg.GetSorted(sorted, func(j int, v []byte, found bool) {
			p := &pf.ents[idx[order[j]]]
			p.value, p.found, p.read = append([]byte(nil), v...), found, true
		})
	}
	return pf
}

// prefetchItems returns how many keys of b Prefetch may read: its
// entries', then its asks', then its signals' (prefetchItem).
func prefetchItems(b *wire.Batch) int { return len(b.Entries) + len(b.Asks) + len(b.Signals) }

// prefetchItem returns the limiter and key of item i of b (prefetchItems),
// nil when the merge reads no record for it: an entry of an unknown
// limiter (the batch is refused), an ask of a limiter that takes none
// (asks), a signal of one that follows no upstream. The asks' and
// signals' records are read beside the entries' (askSlots, ApplyAs):
// read one by one by the committer, a batch of 8,192 signals for keys not
// cached held every other sync behind it for up to seconds.
func (m *Merger) prefetchItem(b *wire.Batch, i int) (*wire.LimiterConfig, string) {
	switch {
	case i < len(b.Entries):
		e := &b.Entries[i]
		return m.lims[e.Limiter], e.Key
	case i < len(b.Entries)+len(b.Asks):
		a := &b.Asks[i-len(b.Entries)]
		if lim := m.lims[a.Limiter]; lim != nil && asks(lim) {
			return lim, a.Key
		}
	default:
		sg := &b.Signals[i-len(b.Entries)-len(b.Asks)]
		if lim := m.lims[sg.Limiter]; lim != nil && lim.Upstream != nil {
			return lim, sg.Key
		}
	}
	return nil, ""
}

// prefetched returns the record of item i (prefetchItem) read by
// Prefetch, when it may be used for a key that is not cached.
func (m *Merger) prefetched(pf *Prefetched, i int) (p *prefetchedKey, ok bool) {
	if pf == nil || m.res == nil || i < 0 || i >= len(pf.ents) || !pf.ents[i].read {
		return nil, false
	}
	p = &pf.ents[i]
	if m.res.abort > pf.seq || m.res.gen[p.slot] > pf.seq {
		return nil, false
	}
	return p, true
}

// residentAdd records that st entered the cache.
func (m *Merger) residentAdd(st *keyState) {
	if m.res == nil {
		return
	}
	st.slot = m.res.slotString(st.skey)
	m.res.cached[st.slot].Add(1)
}

// residentEvicted records that st left the cache (its record is durable) at
// eviction sequence number seq.
func (m *Merger) residentEvicted(st *keyState, seq int64) {
	if m.res == nil {
		return
	}
	m.res.cached[st.slot].Add(-1)
	m.res.gen[st.slot] = seq
}

// residentStale stamps the slot of a storage key whose record is about to
// change without going through the cache (GC deletes).
func (m *Merger) residentStale(skey []byte) {
	if m.res == nil {
		return
	}
	m.res.gen[m.res.slot(skey)] = m.res.seq.Add(1)
}

// residentDropAll records that the whole cache was dropped.
func (m *Merger) residentDropAll() {
	if m.res == nil {
		return
	}
	for _, st := range m.keys {
		m.res.cached[st.slot].Add(-1)
	}
	m.res.abort = m.res.seq.Add(1)
}

func appendKeyStorageKey(dst []byte, limiter, key string) []byte {
	dst = append(dst, prefixKey, byte(len(limiter)))
	dst = append(dst, limiter...)
	return append(dst, key...)
}
