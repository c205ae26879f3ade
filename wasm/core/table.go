package core

// table is an open-addressing hash table (linear probing, backward-shift
// deletion, no tombstones) from (limiter, key) to an index into ents. It
// grows lazily up to the key cap, so an idle isolate holds almost nothing,
// and evicts with a CLOCK sweep once full.
type table struct {
	slots  []int32   // entry index + 1; 0 is empty. len is a power of two.
	chunks [][]entry // entries, allocated chunkSize at a time (no large copies)
	n      int       // entries allocated
	free   []int32   // indexes of removed entries, reused first
	live   int       // entries in use
	max    int       // key cap
	hand   int       // CLOCK hand into ents
	keyB   int64     // bytes of the buffers of long keys

	long     [][]byte // keys longer than inlineKey, by index (entry.longIndex); buffers are reused
	longFree []int32  // indexes of long that hold no key
	leases   pool[leaseRec]
	rates    pool[rateRec]
}

// pool holds side records of entries, allocated chunkSize at a time and
// reused through a free list, so that records come and go without garbage.
type pool[T any] struct {
	chunks [][]T
	n      int32   // records allocated
	free   []int32 // indexes of released records, reused first
}

// alloc returns the index of a zero record.
func (p *pool[T]) alloc() int32 {
	if k := len(p.free); k > 0 {
		i := p.free[k-1]
		p.free = p.free[:k-1]
		return i
	}
	if p.n%chunkSize == 0 {
		p.chunks = append(p.chunks, make([]T, chunkSize))
	}
	p.n++
	return p.n - 1
}

// at returns record i.
func (p *pool[T]) at(i int32) *T { return &p.chunks[i/chunkSize][i%chunkSize] }

// release zeroes record i and makes it available again.
func (p *pool[T]) release(i int32) {
	var zero T
	*p.at(i) = zero
	p.free = append(p.free, i)
}

// bytes returns the memory held by the pool's records.
func (p *pool[T]) bytes(size int64) int64 { return int64(len(p.chunks)) * chunkSize * size }

// evictProbes bounds the CLOCK sweep per insertion, so a flood of unique keys
// costs a bounded amount of work per decision.
const evictProbes = 64

func hashKey(lim uint16, key []byte) uint32 {
	h := uint32(2166136261) ^ uint32(lim)*16777619
	for _, c := range key {
		h ^= uint32(c)
		h *= 16777619
	}
	h ^= h >> 15
	return h | 1
}

func (t *table) mask() uint32 { return uint32(len(t.slots) - 1) }

// find returns the index of the entry for (lim, key), or -1.
func (t *table) find(lim uint8, key []byte, h uint32) int32 {
	if len(t.slots) == 0 {
		return -1
	}
	m := t.mask()
	for i := h & m; ; i = (i + 1) & m {
		s := t.slots[i]
		if s == 0 {
			return -1
		}
		e := t.at(s - 1)
		if e.hash == h && e.lim == lim && t.keyEqual(e, key) {
			return s - 1
		}
	}
}

// insert adds a new entry for (lim, key), which must be absent, evicting one
// entry first when the table is at its cap. It returns the new entry's index
// and the evicted entry's unsynced cost (0 if none was evicted).
func (t *table) insert(lim uint8, key []byte, h uint32, now int64) (idx int32, evicted bool, lost int64) {
	if t.live >= t.max {
		victim := t.victim(now)
		lost = t.at(victim).pending()
		t.remove(victim)
		evicted = true
	}
	if len(t.slots) == 0 || (t.live+1)*2 > len(t.slots) {
		t.grow()
	}
	if n := len(t.free); n > 0 {
		idx = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if t.n%chunkSize == 0 {
			t.chunks = append(t.chunks, make([]entry, chunkSize))
		}
		idx = int32(t.n)
		t.n++
	}
	e := t.at(idx)
	gen := e.gen + 1
	*e = entry{hash: h, lim: lim, gen: gen}
	t.setKey(e, key)
	t.live++
	t.place(idx)
	return idx, evicted, lost
}

func (t *table) place(idx int32) {
	m := t.mask()
	for i := t.at(idx).hash & m; ; i = (i + 1) & m {
		if t.slots[i] == 0 {
			t.slots[i] = idx + 1
			return
		}
	}
}

func (t *table) grow() {
	n := 64
	if len(t.slots) > 0 {
		n = len(t.slots) * 2
	}
	t.slots = make([]int32, n)
	for i := int32(0); i < int32(t.n); i++ {
		if t.at(i).inUse() {
			t.place(i)
		}
	}
}

// remove deletes entry idx and bumps its generation so references held by
// the in-flight batch or the dirty list see it is gone.
func (t *table) remove(idx int32) {
	e := t.at(idx)
	m := t.mask()
	i := e.hash & m
	for t.slots[i] != idx+1 {
		i = (i + 1) & m
	}
	// Backward-shift deletion.
	for j := (i + 1) & m; t.slots[j] != 0; j = (j + 1) & m {
		k := t.at(t.slots[j]-1).hash & m
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = 0
	if int(e.klen) > inlineKey {
		t.longFree = append(t.longFree, e.longIndex())
	}
	switch {
	case e.aux > 0:
		t.leases.release(e.aux - 1)
	case e.aux < 0:
		t.rates.release(-e.aux - 1)
	}
	*e = entry{gen: e.gen + 1}
	t.free = append(t.free, idx)
	t.live--
}

// victim picks the entry to evict at time now: the CLOCK sweep clears
// reference bits and returns the first unreferenced entry whose state has
// expired; within evictProbes steps it otherwise settles for the first
// unreferenced entry with nothing to sync, then the first unreferenced
// entry, then the entry under the hand. It never picks a pinned entry
// (fPin) while another is in use.
func (t *table) victim(now int64) int32 {
	synced, fallback := int32(-1), int32(-1)
	for p := 0; p < evictProbes; p++ {
		if t.hand >= t.n {
			t.hand = 0
		}
		i := int32(t.hand)
		t.hand++
		e := t.at(i)
		if !e.inUse() || e.flags&fPin != 0 {
			continue
		}
		if e.ref() {
			// Only the sweep up to the first candidate clears bits:
			// probing past it must not move the hand over entries it
			// does not evict.
			if fallback < 0 {
				e.set(fRef, false)
			}
			continue
		}
		if e.exp <= now {
			// Expired: a fresh entry would decide the same.
			return i
		}
		if synced < 0 && e.unsynced() == 0 {
			synced = i
		}
		if fallback < 0 {
			fallback = i
		}
	}
	if synced < 0 {
		synced = fallback
	}
	if synced >= 0 {
		t.hand = int(synced) + 1
		return synced
	}
	for p := 0; ; p++ {
		if t.hand >= t.n {
			t.hand = 0
		}
		i := int32(t.hand)
		t.hand++
		// A pinned entry only when every entry is (cannot happen: a
		// batch names at most the table's cap of keys).
		if e := t.at(i); e.inUse() && (e.flags&fPin == 0 || p >= t.n) {
			return i
		}
	}
}

// chunkSize is the number of entries allocated at once.
const chunkSize = 256

// at returns entry idx.
func (t *table) at(idx int32) *entry { return &t.chunks[idx/chunkSize][idx%chunkSize] }

// setKey stores key in e: inline when it fits, else in a buffer of t.long
// (reused from a removed long key when one is free).
func (t *table) setKey(e *entry, key []byte) {
	e.klen = uint16(len(key))
	if len(key) <= inlineKey {
		copy(e.kin[:], key)
		return
	}
	var i int32
	if n := len(t.longFree); n > 0 {
		i = t.longFree[n-1]
		t.longFree = t.longFree[:n-1]
	} else {
		i = int32(len(t.long))
		t.long = append(t.long, nil)
	}
	b := t.long[i]
	t.keyB -= int64(cap(b))
	b = append(b[:0], key...)
	t.keyB += int64(cap(b))
	t.long[i] = b
	e.setLongIndex(i)
}

// keyEqual reports whether e's key is k.
func (t *table) keyEqual(e *entry, k []byte) bool {
	if int(e.klen) != len(k) {
		return false
	}
	if len(k) <= inlineKey {
		for i := 0; i < len(k); i++ {
			if e.kin[i] != k[i] {
				return false
			}
		}
		return true
	}
	return sameKey(t.long[e.longIndex()], k)
}

// keyBytes returns e's key; the slice aliases the table (do not keep it).
func (t *table) keyBytes(e *entry) []byte {
	if int(e.klen) <= inlineKey {
		return e.kin[:e.klen]
	}
	return t.long[e.longIndex()]
}

// newLease gives e (of a strict limiter) a zero lease record. Like every
// allocating helper it is kept out of line: under TinyGo a function that
// may allocate zeroes a GC frame on entry (see Core.insert).
//
//go:noinline
func (t *table) newLease(e *entry) *leaseRec {
	i := t.leases.alloc()
	e.aux = i + 1
	return t.leases.at(i)
}

// lease returns the lease record of e, which has one (strict limiters).
func (t *table) lease(e *entry) *leaseRec { return t.leases.at(e.aux - 1) }

// newRate gives e (of an approximate window limiter) a zero rate record
// (out of line: see newLease).
//
//go:noinline
func (t *table) newRate(e *entry) *rateRec {
	i := t.rates.alloc()
	e.aux = -i - 1
	return t.rates.at(i)
}

// others returns the estimated cost per ns other isolates admit for e's
// key: 0 unless e has a rate record (keys of approximate window limiters
// with a view). It returns a value, not the record, so that the decision
// path holds no pointer into the pool (under TinyGo a pointer live across
// a call takes a slot of the function's GC frame).
func (t *table) others(e *entry) float64 {
	if e.aux >= 0 {
		return 0
	}
	return t.rates.at(-e.aux - 1).others
}

// rate returns the rate record of e, or nil if it has none.
func (t *table) rate(e *entry) *rateRec {
	if e.aux >= 0 {
		return nil
	}
	return t.rates.at(-e.aux - 1)
}
