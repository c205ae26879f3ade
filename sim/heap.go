package sim

// Event kinds.
const (
	evTimer     = iota // a node's sync is due
	evArrive           // a batch reaches the coordinator
	evReply            // a reply reaches the node
	evTimeout          // the node gives up waiting for a reply
	evEvict            // the node's isolate is evicted (churn)
	evDeadline         // requests the node holds for a sync reach their deadline
	evUpstream         // an upstream's answer reaches the node (tok: its parked index)
	evWindowEnd        // a key's window ends (tok: the key's index; node unused)
	evKill             // the node's isolate is killed (tok: the scenario's kill index)
	evRestart          // a killed node's new incarnation starts
)

// event is one entry of the event heap; ordered by (t, seq), so events at
// the same time run in the order they were scheduled.
type event struct {
	t    int64
	seq  uint64
	tok  uint64 // attempt or timer token, checked when the event runs
	node int32
	gen  int32 // node incarnation when scheduled
	kind uint8
}

// evHeap is a binary min-heap of events, by value (no allocation per event
// once grown).
type evHeap struct {
	ev  []event
	seq uint64
}

func (h *evHeap) less(i, j int) bool {
	a, b := &h.ev[i], &h.ev[j]
	return a.t < b.t || (a.t == b.t && a.seq < b.seq)
}

func (h *evHeap) push(e event) {
	h.seq++
	e.seq = h.seq
	h.ev = append(h.ev, e)
	i := len(h.ev) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.ev[i], h.ev[p] = h.ev[p], h.ev[i]
		i = p
	}
}

// top returns the earliest event's time, or never.
func (h *evHeap) top() int64 {
	if len(h.ev) == 0 {
		return never
	}
	return h.ev[0].t
}

func (h *evHeap) pop() event {
	e := h.ev[0]
	n := len(h.ev) - 1
	h.ev[0] = h.ev[n]
	h.ev = h.ev[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.ev[i], h.ev[m] = h.ev[m], h.ev[i]
		i = m
	}
	return e
}
