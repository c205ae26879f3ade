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
	keyB   int64     // bytes of key strings held
}

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
func (t *table) find(lim uint16, key []byte, h uint32) int32 {
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
		if e.hash == h && e.lim == lim && e.keyEqual(key) {
			return s - 1
		}
	}
}

// insert adds a new entry for (lim, key), which must be absent, evicting one
// entry first when the table is at its cap. It returns the new entry's index
// and the evicted entry's unsynced cost (0 if none was evicted).
func (t *table) insert(lim uint16, key []byte, h uint32, now int64) (idx int32, evicted bool, lost int64) {
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
	*e = entry{hash: h, lim: lim, gen: gen, inUse: true}
	e.setKey(key)
	if len(key) > inlineKey {
		t.keyB += int64(len(key))
	}
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
		if t.at(i).inUse {
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
		t.keyB -= int64(e.klen)
	}
	*e = entry{gen: e.gen + 1}
	t.free = append(t.free, idx)
	t.live--
}

// victim picks the entry to evict at time now: the CLOCK sweep clears
// reference bits and returns the first unreferenced entry whose state has
// expired; within evictProbes steps it otherwise settles for the first
// unreferenced entry with nothing to sync, then the first unreferenced
// entry, then the entry under the hand.
func (t *table) victim(now int64) int32 {
	synced, fallback := int32(-1), int32(-1)
	for p := 0; p < evictProbes; p++ {
		if t.hand >= t.n {
			t.hand = 0
		}
		i := int32(t.hand)
		t.hand++
		e := t.at(i)
		if !e.inUse {
			continue
		}
		if e.ref {
			// Only the sweep up to the first candidate clears bits:
			// probing past it must not move the hand over entries it
			// does not evict.
			if fallback < 0 {
				e.ref = false
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
	for {
		if t.hand >= t.n {
			t.hand = 0
		}
		i := int32(t.hand)
		t.hand++
		if t.at(i).inUse {
			return i
		}
	}
}

// chunkSize is the number of entries allocated at once.
const chunkSize = 256

// at returns entry idx.
func (t *table) at(idx int32) *entry { return &t.chunks[idx/chunkSize][idx%chunkSize] }
