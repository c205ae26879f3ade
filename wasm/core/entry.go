package core

import (
	"unsafe"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// entry is the state of one (limiter, key) in an isolate.
type entry struct {
	key   string          // the key when longer than inlineKey bytes
	kin   [inlineKey]byte // the key when at most inlineKey bytes (saves a memory load per lookup)
	klen  uint16
	hash  uint32
	gen   uint32 // bumped on removal; in-flight references compare it
	lim   uint16
	inUse bool
	ref   bool  // CLOCK reference bit, set on every use after the first
	dirty bool  // on the dirty list: has something to sync
	dryN  uint8 // strict mode: refusals in window dryWin, the dry spell doubles with each

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
	vWin        int64 // window of the last global view
	vCur, vPrev int64 // global counts for vWin and vWin-1
	vAt         int64 // estimated time the coordinator made the view, ns (isolate clock)
	hasView     bool
	isolates    int64   // isolates sharing the key, from the view (>= 1)
	others      float64 // estimated cost per ns admitted by other isolates
	pace        float64 // the same, measured while the window was under 3/4 full
	bWin, bAt   int64   // window and time of the base view of the rate estimate
	bCount      int64   // global count of the base view
	ackedSince  int64   // own cost in window bWin acknowledged since the base view
	tat         int64   // bucket algorithms: theoretical arrival time, ns
	lease       int64   // strict mode: cost still admissible within the lease
	leaseGrant  int64   // strict mode: size of the last grant
	leaseWin    int64   // strict mode: window the lease is for
	standA      int64   // strict mode: standing lease, cost admissible in window standUntil without asking
	standUntil  int64   // strict mode: the window the standing lease is for
	asked       int64   // strict mode: cost refused for want of a lease, in the batch in flight
	dryWin      int64   // strict mode: window the coordinator had no budget left for this isolate (-1: none)
	dryUntil    int64   // strict mode: ns time until which the isolate denies locally in dryWin
	hasLease    bool
}

// pending is the cost admitted here and not yet put in a batch.
func (e *entry) pending() int64 { return e.pCur + e.pPrev }

// unsynced is the cost admitted here that the coordinator has not yet
// acknowledged.
func (e *entry) unsynced() int64 { return e.lCur + e.lPrev }

// roll moves the local window counters forward to window w. Demand of a
// past window is dropped: it must not ask for budget in the new one.
func (e *entry) roll(w int64) {
	switch {
	case w == e.win:
	case w == e.win+1:
		e.lPrev, e.lCur = e.lCur, 0
		e.pPrev, e.pCur = e.pCur, 0
		e.win, e.demand = w, 0
	case w > e.win:
		e.lPrev, e.lCur, e.pPrev, e.pCur = 0, 0, 0, 0
		e.win, e.demand = w, 0
	}
}

// view returns the global counts of windows w and w-1 from the last view.
func (e *entry) view(w int64) (cur, prev int64) {
	switch e.vWin {
	case w:
		return e.vCur, e.vPrev
	case w - 1:
		return 0, e.vCur
	}
	return 0, 0
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
func (e *entry) rebase(v *wire.View, at int64) {
	e.bWin, e.bAt, e.bCount, e.ackedSince = v.Window, at, v.Count, 0
}

// inlineKey is the longest key stored inside the entry.
const inlineKey = 32

func (e *entry) setKey(k []byte) {
	e.klen = uint16(len(k))
	if len(k) <= inlineKey {
		copy(e.kin[:], k)
		return
	}
	e.key = string(k)
}

// keyEqual reports whether e's key is k.
func (e *entry) keyEqual(k []byte) bool {
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
	return wire.Equal(e.key, k)
}

// keyBytes returns the key; the slice aliases e (do not keep it).
func (e *entry) keyBytes() []byte {
	if int(e.klen) <= inlineKey {
		return e.kin[:e.klen]
	}
	return unsafe.Slice(unsafe.StringData(e.key), len(e.key))
}
