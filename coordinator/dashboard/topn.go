package dashboard

import (
	"container/heap"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// topKeys keeps the busiest keys of one limiter, bounded: at most cap
// entries, updated from the views of each applied batch (O(log cap) per
// entry), never by scanning the store. A key's rank is its latest global
// view: windowed limiters order by (window, count), so a key counted in a
// newer window outranks any key of an older one and yesterday's busy keys
// give way; bucket limiters order by theoretical arrival time (the later,
// the more of the bucket is used). When full, a new key replaces the
// lowest-ranked entry only if it ranks higher. A key dropped from the set
// comes back with its exact count on its next sync, so the set holds the
// busiest keys among those that synced since they were last outranked.
// Not safe for concurrent use (the dashboard's lock guards it).
type topKeys struct {
	cap int
	idx map[string]*topEntry // key -> its entry (entry.pos is its place in h)
	h   []*topEntry          // min-heap by rank
}

// topEntry is one key of a topKeys with its latest view.
type topEntry struct {
	key      string
	window   int64 // windowed: window index of count
	count    int64 // windowed: global cost in window
	prev     int64 // windowed: global cost in window-1
	tat      int64 // bucket: theoretical arrival time, ns
	isolates int64 // isolates that recently reported the key
	at       int64 // coordinator time of the view, ns
	pos      int
	// The key's upstream state as of its last reply (reset by each view:
	// a reply lists the upstream state of every key of the batch that has
	// some): until when it is paused and its circuit open (ns), and the
	// circuit (wire.CircuitClosed, CircuitOpen, CircuitHalfOpen).
	pauseEnd, openEnd, circuit int64
}

func newTopKeys(capacity int) *topKeys {
	return &topKeys{cap: capacity, idx: make(map[string]*topEntry, capacity)}
}

// less reports whether a ranks below b.
func (e *topEntry) less(b *topEntry) bool {
	if e.window != b.window {
		return e.window < b.window
	}
	if e.count != b.count {
		return e.count < b.count
	}
	return e.tat < b.tat
}

type topHeap []*topEntry

func (h topHeap) Len() int           { return len(h) }
func (h topHeap) Less(i, j int) bool { return h[i].less(h[j]) }
func (h topHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].pos = i; h[j].pos = j }
func (h *topHeap) Push(x any)        { e := x.(*topEntry); e.pos = len(*h); *h = append(*h, e) }
func (h *topHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// observe records the view v of a key (after a batch was applied) at now.
func (t *topKeys) observe(v *wire.View, now int64) {
	e := topEntry{key: v.Key, window: v.Window, count: v.Count, prev: v.Prev, tat: v.TAT,
		isolates: v.Isolates, at: now}
	th := (*topHeap)(&t.h)
	if old, ok := t.idx[v.Key]; ok {
		e.key, e.pos = old.key, old.pos
		*old = e
		heap.Fix(th, e.pos)
		return
	}
	e.key = string([]byte(v.Key)) // do not pin the batch's memory
	if len(t.h) < t.cap {
		ne := e
		t.idx[ne.key] = &ne
		heap.Push(th, &ne)
		return
	}
	if len(t.h) == 0 || !t.h[0].less(&e) {
		return
	}
	low := t.h[0]
	delete(t.idx, low.key)
	e.pos = 0
	*low = e
	t.idx[low.key] = low
	heap.Fix(th, 0)
}

// upstream records the upstream state u of a kept key, in a reply made
// at now (a key not kept is ignored: it has no row to show it in).
func (t *topKeys) upstream(u *wire.UpView, now int64) {
	e, ok := t.idx[u.Key]
	if !ok {
		return
	}
	e.pauseEnd, e.openEnd, e.circuit = 0, 0, u.Circuit
	if u.Pause > 0 {
		e.pauseEnd = now + u.Pause
	}
	if u.Circuit == wire.CircuitOpen && u.Open > 0 {
		e.openEnd = now + u.Open
	}
}

// forget removes key (after a reset).
func (t *topKeys) forget(key string) {
	e, ok := t.idx[key]
	if !ok {
		return
	}
	delete(t.idx, key)
	heap.Remove((*topHeap)(&t.h), e.pos)
}

// entries returns copies of the entries, in no particular order.
func (t *topKeys) entries() []topEntry {
	out := make([]topEntry, len(t.h))
	for i, e := range t.h {
		out[i] = *e
	}
	return out
}
