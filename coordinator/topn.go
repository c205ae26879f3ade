package coordinator

import "sort"

// topKeys keeps a limiter's busiest keys: the keys with the largest count
// in the current window (buckets: the largest tokens in use), at most n of
// them. It is updated as deltas are applied, O(log n) each (a min-heap
// with an index: a key not in the set replaces the smallest once the set
// is full and its count is larger), so the dashboard reads it without
// scanning the store, whatever the number of keys.
type topKeys struct {
	n     int
	win   int64
	heap  []topEntry // min-heap by count
	index map[string]int
}

type topEntry struct {
	key   string
	count int64
}

// topKeysSize is how many keys each limiter keeps for the dashboard.
const topKeysSize = 100

func newTopKeys(n int) *topKeys { return &topKeys{n: n, index: make(map[string]int, n)} }

// observe records that key's count in window win is count. A newer window
// starts the set afresh (the counts of an old window no longer rank).
func (t *topKeys) observe(key string, win, count int64) {
	if win > t.win {
		t.win, t.heap = win, t.heap[:0]
		clear(t.index)
	} else if win < t.win {
		return
	}
	if i, ok := t.index[key]; ok {
		t.heap[i].count = count
		t.fix(i)
		return
	}
	if len(t.heap) < t.n {
		t.heap = append(t.heap, topEntry{key, count})
		t.index[key] = len(t.heap) - 1
		t.up(len(t.heap) - 1)
		return
	}
	if count <= t.heap[0].count {
		return
	}
	delete(t.index, t.heap[0].key)
	t.heap[0] = topEntry{key, count}
	t.index[key] = 0
	t.down(0)
}

// forget drops key (it was reset).
func (t *topKeys) forget(key string) {
	i, ok := t.index[key]
	if !ok {
		return
	}
	last := len(t.heap) - 1
	t.swap(i, last)
	delete(t.index, key)
	t.heap = t.heap[:last]
	if i < last {
		t.fix(i)
	}
}

// list returns up to n keys, busiest first.
func (t *topKeys) list(n int) []topEntry {
	out := append([]topEntry(nil), t.heap...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].count != out[j].count {
			return out[i].count > out[j].count
		}
		return out[i].key < out[j].key
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func (t *topKeys) fix(i int) {
	if !t.up(i) {
		t.down(i)
	}
}

func (t *topKeys) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if t.heap[p].count <= t.heap[i].count {
			break
		}
		t.swap(i, p)
		i, moved = p, true
	}
	return moved
}

func (t *topKeys) down(i int) {
	for {
		l, small := 2*i+1, i
		if l < len(t.heap) && t.heap[l].count < t.heap[small].count {
			small = l
		}
		if r := l + 1; r < len(t.heap) && t.heap[r].count < t.heap[small].count {
			small = r
		}
		if small == i {
			return
		}
		t.swap(i, small)
		i = small
	}
}

func (t *topKeys) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.index[t.heap[i].key], t.index[t.heap[j].key] = i, j
}
