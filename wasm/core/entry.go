package core

import (
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// entry is the state of one (limiter, key) in an isolate. It holds what
// every key needs; the state only some keys use lives in side records of
// the table, referenced by aux: a strict limiter's lease (leaseRec) and an
// approximate window's estimate of the other isolates' rate (rateRec, from
// the key's first global view on). An entry holds no pointer, so the
// collector never scans the table's chunks, and a key of up to inlineKey
// bytes costs no allocation of its own.
//
// Its layout is fixed (no int, no pointer) so that it is the same size
// natively and on wasm32: entrySize, 176 bytes.
type entry struct {
	// kin holds the key when it is at most inlineKey bytes; a longer key
	// is kept by the table (table.long) and kin holds its index.
	kin   [inlineKey]byte
	hash  uint32
	gen   uint32 // odd while the entry is in use; bumped on insertion and removal
	aux   int32  // 1 + index of the side record (strict: table.leases, approximate window: table.rates); 0 none
	klen  uint16
	lim   uint8 // limiter index (wire.MaxLimiters is 256)
	flags uint8 // fRef, fDirty, fView, fName, fPin, fWatch, fLapse

	limit int64 // limit for this key (override applied)
	last  int64 // latest time seen for this key, ns
	exp   int64 // ns time from which the state no longer affects decisions (windows over, bucket full)

	// Windowed algorithms: local cost not yet acknowledged by the
	// coordinator, for window win (cur) and win-1 (prev); the pending part
	// is not yet in a batch.
	win         int64
	lCur, lPrev int64
	pCur, pPrev int64
	demand      int64 // cost asked since the last batch (admitted or not)
	den         int64 // cost of final denials since the last batch (wire.Batch.Denials)
	vWin        int64 // window of the last global view (also the window of the rate estimate's base view)
	vCur, vPrev int64 // global counts for vWin and vWin-1
	vAt         int64 // estimated time the coordinator made the view, ns (isolate clock)
	isolates    int64 // isolates sharing the key, from the view (>= 1)
	tat         int64 // bucket algorithms: theoretical arrival time, ns
}

// Flags of an entry.
const (
	fRef   = 1 << iota // CLOCK reference bit, set on every use after the first
	fDirty             // on the dirty list: has something to sync
	fView              // holds a global view (vWin, vCur, vPrev, vAt)
	fName              // named in the next batch even with nothing to report (a recheck: resets.go); cleared by the reply's view
	fPin               // never evicted: an entry Recall put the refused batch back in, while it runs (retime.go)
	fWatch             // on the lapses list: its lease is watched for lapsing with units left (lapse.go)
	fLapse             // named in the next batch: its lease lapsed with units left (lapse.go); cleared when sent
)

// inUse reports whether the entry holds a key (its generation is odd).
func (e *entry) inUse() bool { return e.gen&1 == 1 }

func (e *entry) ref() bool     { return e.flags&fRef != 0 }
func (e *entry) dirty() bool   { return e.flags&fDirty != 0 }
func (e *entry) hasView() bool { return e.flags&fView != 0 }

// set sets (on) or clears flag f.
func (e *entry) set(f uint8, on bool) {
	if on {
		e.flags |= f
	} else {
		e.flags &^= f
	}
}

// leaseRec is the strict-mode state of a key (limiters in strict mode only).
type leaseRec struct {
	lease      int64 // cost still admissible within the lease
	leaseGrant int64 // size of the last grant
	leaseWin   int64 // window the lease is for
	standA     int64 // standing lease, cost admissible in each window after leaseWin through standUntil without asking
	standUntil int64 // the last window the standing lease is for (wire.View.StandTo)
	asked      int64 // cost refused for want of a lease, in the batch in flight
	unsent     int64 // cost of requests held (SyncRetry) since batch unsentSeq was cut: their ask is not sent yet
	unsentSeq  int64 // the batch (Core.seq) unsent is counted since
	reask      int64 // of unsent, what the host's decisions again of the requests it held after reply reaskN would ask twice (record)
	reaskN     int64 // the reply (Core.replies) reask is for
	amended    int64 // of unsent, what amendments of the outstanding batch asked for (amend.go)
	dryWin     int64 // window the coordinator had no budget left for this isolate (-1: none)
	dryUntil   int64 // ns time until which the isolate denies locally in dryWin
	dryN       uint8 // refusals in window dryWin, the dry spell doubles with each
	hasLease   bool
	longLife   bool  // the last reply's lease lives a period or longer (wire.View.Life): see Core.expectCovered
	expires    int64 // ns from which lease and standA are void (the coordinator takes them back); 0: never
	held       int64 // of the view's window (entry.vWin), what other isolates probably admitted and did not report (wire.View.Held)
	pace       int64 // the cost per period other isolates are expected to admit, as of the view (wire.View.Pace; 0: not told)
}

// rateRec is the estimate of the cost other isolates admit for a key of an
// approximate window limiter, kept from the key's first global view on.
// Its base view is of window entry.vWin.
type rateRec struct {
	others float64 // estimated cost per ns admitted by other isolates
	pace   float64 // the same, measured while the window was under 3/4 full
	bAt    int64   // time of the base view of the estimate
	// bBase is the global count of the base view plus this isolate's own
	// cost in that window acknowledged since: the count growth beyond it
	// is the others'.
	bBase int64
}

// pending is the cost admitted here and not yet put in a batch.
func (e *entry) pending() int64 { return e.pCur + e.pPrev }

// unsynced is the cost admitted here that the coordinator has not yet
// acknowledged.
func (e *entry) unsynced() int64 { return e.lCur + e.lPrev }

// roll moves the local window counters forward to window w. Demand of a
// past window is dropped: it must not ask for budget in the new one.
func (e *entry) roll(w int64) {
	if w <= e.win {
		return
	}
	_, e.lCur, e.lPrev = limitmath.Roll(e.win, e.lCur, e.lPrev, w)
	_, e.pCur, e.pPrev = limitmath.Roll(e.win, e.pCur, e.pPrev, w)
	e.win, e.demand = w, 0
}

// view returns the global counts of windows w and w-1 from the last view.
func (e *entry) view(w int64) (cur, prev int64) {
	return limitmath.Counts(e.vWin, e.vCur, e.vPrev, w)
}

// setExp records when e's state stops mattering: the bucket is full again,
// or both windows a decision reads (win and win-1) are over.
func (e *entry) setExp(l *limiter, now int64) {
	if l.bucket {
		e.exp = max64(e.tat, now)
		return
	}
	e.exp = max64(e.exp, addSat(max64(e.win, e.vWin), 2)*l.cfg.Period)
}

// rebase makes v (made at time at) the base view of the rate estimate.
func (r *rateRec) rebase(v *wire.View, at int64) {
	r.bAt, r.bBase = at, v.Count
}

// inlineKey is the longest key stored inside the entry.
const inlineKey = 32

// longIndex returns the index in table.long of e's key (longer than
// inlineKey bytes).
func (e *entry) longIndex() int32 {
	return int32(uint32(e.kin[0]) | uint32(e.kin[1])<<8 | uint32(e.kin[2])<<16 | uint32(e.kin[3])<<24)
}

func (e *entry) setLongIndex(i int32) {
	e.kin[0], e.kin[1], e.kin[2], e.kin[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
}
