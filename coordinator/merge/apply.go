package merge

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Applying a batch: validate, load the keys, apply the deltas and
// signals, compute every key's view (and strict lease).

// Check validates b and reports the first entry naming an unknown limiter,
// as a *wire.FieldError naming the field ("e[3].limiter"). It only reads the
// configuration, so it is safe to call concurrently with Apply.
func (m *Merger) Check(b *wire.Batch) error {
	if err := b.Validate(); err != nil {
		return err
	}
	for i := range b.Entries {
		if m.lims[b.Entries[i].Limiter] == nil {
			return &wire.FieldError{Field: "e[" + strconv.Itoa(i) + "].limiter",
				Err: errors.New("unknown limiter " + strconv.Quote(b.Entries[i].Limiter))}
		}
	}
	for i := range b.Signals {
		if m.lims[b.Signals[i].Limiter] == nil {
			return &wire.FieldError{Field: "up[" + strconv.Itoa(i) + "].limiter",
				Err: errors.New("unknown limiter " + strconv.Quote(b.Signals[i].Limiter))}
		}
	}
	return m.checkAsks(b)
}

// slot is one distinct key of a batch.
type slot struct {
	st     *keyState
	key    string
	maxWin int64 // largest window of the key's entries
	demand int64 // sum of max(Demand, Delta) of the key's entries
	unmet  int64 // sum of Demand - Delta where positive: cost the isolate was refused (e.g. waiting for a lease)
	delta  int64 // sum of Delta of the key's entries
	ask    int64 // cost the batch's amendment asks for (wire.Batch.Asks, amend.go)
	// req: the batch reported cost admitted in the key (leased windowed),
	// in windows reqLo to reqHi (carry.go).
	req          bool
	reqLo, reqHi int64
	asked        bool // the key is among the asks only, not the entries: its view is made as for a retry
}

// Apply applies b at time now (ns) and returns the reply: one View per
// distinct (limiter, key), in order of first appearance. A retry of the
// isolate's last applied batch (same Seq, same content) is not applied
// again and gets the current views; any other sequence number but the next
// is a *SeqError (see sequence.go). Nothing is applied when it returns an
// error. The changes are staged for the next Commit.
func (m *Merger) Apply(b *wire.Batch, now int64) (*wire.Reply, error) {
	return m.ApplyAs(b, "", now, nil)
}

// ApplyPrefetched is Apply with the records Prefetch read for b (pf may be
// nil); a prefetched record is used only when it is still current.
func (m *Merger) ApplyPrefetched(b *wire.Batch, now int64, pf *Prefetched) (*wire.Reply, error) {
	return m.ApplyAs(b, "", now, pf)
}

// ApplyAs is ApplyPrefetched for an isolate of the namespace scope (see
// scope.go): the isolate is known as scope + b.Isolate.
func (m *Merger) ApplyAs(b *wire.Batch, scope string, now int64, pf *Prefetched) (*wire.Reply, error) {
	if err := m.Check(b); err != nil {
		return nil, err
	}
	m.refreshLimits()
	skew := m.checkTimes(b, now)
	if err := m.recovered(); err != nil {
		return nil, err
	}
	h, err := m.loadHWM(scope + b.Isolate)
	if err != nil {
		return nil, err
	}
	if skew != nil && !h.retried(b) {
		return nil, skew
	}
	sum := batchSum(b)
	dup, err := checkSeq(h, b, sum)
	if err != nil {
		m.stats.SeqRefused++
		return nil, err
	}
	// The cached high-water mark's id: every batch of the isolate then uses
	// the same string, which isoState lookups compare by pointer first.
	isolate := h.id
	if !dup {
		if m.pred, err = m.predecessor(b, scope); err != nil {
			return nil, err
		}
		defer func() { m.pred = "" }()
	}
	m.oneWay = min(max(now-b.At, 0), maxOneWay)
	m.cutAt = b.At
	m.spans = b.Spans
	m.pace = b.Pace
	// Load every key first: after this point nothing can fail.
	m.applySeq++
	mark := m.applySeq
	slots := m.slots[:0]
	at := m.at[:0]
	defer func() {
		clear(slots)
		m.slots, m.at = slots[:0], at[:0]
	}()
	for i := range b.Entries {
		e := &b.Entries[i]
		st, err := m.loadKey(m.lims[e.Limiter], e.Key, pf, i, now)
		if err != nil {
			return nil, err
		}
		if st.mark != mark {
			st.mark, st.slotIdx = mark, int32(len(slots))
			slots = append(slots, slot{st: st, key: e.Key, maxWin: e.Window})
		}
		j := st.slotIdx
		s := &slots[j]
		s.maxWin = max(s.maxWin, e.Window)
		s.demand = addSat(s.demand, max(e.Demand, e.Delta))
		s.delta = addSat(s.delta, e.Delta)
		s.unmet = addSat(s.unmet, max(e.Demand-e.Delta, 0))
		at = append(at, j)
	}
	if slots, err = m.askSlots(b, slots, mark, pf, now); err != nil {
		return nil, err
	}
	for j := range slots {
		h.name(slots[j].st.lim) // the limiters it runs (fullnotice.go)
	}
	sigs := m.sigs[:0]
	defer func() {
		clear(sigs)
		m.sigs = sigs[:0]
	}()
	for i := range b.Signals {
		sg := &b.Signals[i]
		lim := m.lims[sg.Limiter]
		if lim.Upstream == nil {
			// Only limiters configured to follow their upstream take
			// signals (upstream.go); the others' are ignored and counted.
			sigs = append(sigs, nil)
			continue
		}
		st, err := m.loadKey(lim, sg.Key, pf, len(b.Entries)+len(b.Asks)+i, now)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, st)
	}
	if len(b.Asks) > 0 {
		m.stats.Amendments++
	}
	if dup {
		m.stats.Duplicates++
	} else {
		m.stats.Batches++
		t := min(b.At, now)
		for i := range b.Entries {
			s := &slots[at[i]]
			m.applyDelta(s, isolate, &b.Entries[i], t, now)
		}
		tok := m.reportToken(scope)
		for i, st := range sigs {
			if st == nil {
				m.stats.SignalsIgnored++
				continue
			}
			m.applySignal(st, isolate, h.hash, tok, &b.Signals[i], now)
		}
		h.seq, h.seen, h.sum = b.Seq, now, sum
		if len(b.Entries) < wire.MaxBatchEntries-1 {
			// The module stops adding keys once the next could
			// overflow the batch: short of that, every key it
			// admitted cost in is in this batch (lastHeard).
			h.heard = now
		}
		h.bind(b)
		m.markHWM(h)
	}
	rp := &wire.Reply{Version: wire.Version, Seq: b.Seq, At: now, Entries: make([]wire.View, len(slots))}
	for j := range slots {
		s := &slots[j]
		v := &rp.Entries[j]
		v.Limiter, v.Key = s.st.lim.Name, s.key
		m.view(s, h, now, !dup && !s.asked, b.End, v)
		m.noteFull(s, v, now)
		if s.ask > 0 && !b.End {
			m.grantAsk(s, isolate, now, v, dup)
		}
		if b.Limits {
			v.Limit = s.st.lim.LimitFor(s.key) // the isolate answers with the coordinator's limit
		}
		if s.st.up != nil {
			m.addUpView(rp, s.st, s.key, isolate, now, false)
		}
	}
	for i, st := range sigs {
		if st != nil && st.mark != mark && len(rp.Upstream) < wire.MaxBatchEntries { // not among the entries: its view is not there yet
			// (at most MaxBatchEntries upstream views, what the module
			// reads: the rest are told with a later reply)
			st.mark, st.slotIdx = mark, -1
			m.addUpView(rp, st, b.Signals[i].Key, isolate, now, true)
		}
	}
	m.finishReply(rp, b.ResetGen, now)
	if !dup && m.obs != nil {
		m.obs.Applied(b, rp, now)
	}
	m.addFullViews(rp, h, mark, b.Limits, now) // after the observers: they count what the batch's keys did
	return rp, nil
}

// maxOneWay bounds the one-way latency a batch's time suggests (ns): an
// isolate's clock behind the coordinator's makes its batches look older.
const maxOneWay = 250e6

// applyDelta adds one entry to its slot's key. t is the batch time for
// buckets.
func (m *Merger) applyDelta(s *slot, isolate string, e *wire.Delta, t, now int64) {
	st := s.st
	m.markKey(st)
	m.stats.DeltasApplied++
	lim := st.lim
	strict := lim.Leased()
	var me *isoState
	if strict {
		me = m.iso(st, e.Key, isolate, now)
	}
	d := e.Delta
	if lim.IsBucket() {
		if me != nil {
			me.lease -= min(d, max(me.lease, 0)) // the reservation is spent
		}
		if d > 0 {
			t = max(t, now-lim.Period)
			limit := st.limitFor(e.Key, now)
			st.tat = limitmath.AdvanceTAT(st.tat, t, d, lim.Period, limit)
			if strict {
				// Isolates spend only what they were leased, and the
				// leases fit the bucket's tokens, so the bucket never
				// owes more than its burst. Cost past that is a late
				// report of a lease charged already at its expiry
				// (chargeExpired: an isolate silent past its lease's
				// life, and forgotten since, that then reports): the
				// second charge would hold the bucket below empty
				// (TestLeaseInvariantConcurrent, about 1 run in 300:
				// 101-103 tokens owed of a burst of 100). The other
				// cost past it, what isolates admitted alone (failing
				// open through an outage) or under a limit since
				// lowered, leaves the bucket empty, as a bucket that
				// admitted it would be, not owing more.
				st.tat = min(st.tat, addSat(now, limitmath.MulDiv(lim.EffectiveBurst(limit), lim.Period, limit)))
			} else {
				st.tat = min(st.tat, addSat(now, refillsAhead(lim, limit))) // approximate debt: viewbound.go
			}
		}
		return
	}
	w := e.Window
	cw := countWindow(lim, st.win, w, now) // where it is counted
	st.noteRoll(cw)
	st.win, st.count, st.prev = limitmath.Roll(st.win, st.count, st.prev, cw)
	switch cw {
	case st.win:
		st.count = addSat(st.count, d)
	case st.win - 1:
		st.prev = addSat(st.prev, d)
	case st.win - 2:
		if st.win <= limitmath.Window(now, lim.Period) {
			m.stats.DeltasStale++
			return
		}
		// The key is a window ahead of this coordinator's clock (an
		// isolate whose clock runs fast, within MaxClockSkew, reported
		// the next window), so w is the window before the coordinator's
		// current one, where honest isolates still report what they
		// admitted before it ended: counted in the key's previous
		// window (the current one here), once and a window late, which
		// only denies sooner. Dropped, an edge whose clock ran ahead
		// (or a client with an edge token) made the others' last counts
		// of w disappear.
		st.prev = addSat(st.prev, d)
	default:
		m.stats.DeltasStale++
		return
	}
	if me != nil && me.leaseWin < w && w <= me.standUntil {
		// The isolate's first cost in w: it began w on a standing lease,
		// the last one told or (if that reply reached it after w began)
		// the one before; standRes covers both, and until it has seen a
		// reply for w it may admit up to that.
		me.leaseWin, me.lease, me.granted = w, me.standRes, me.standRes
	}
	if me != nil && d > 0 {
		// The windows it had requests in, noted in window order once the
		// batch's entries are in (view): the module sends the current
		// window's entry before the previous one's.
		if !s.req {
			s.reqLo, s.reqHi, s.req = w, w, true
		}
		s.reqLo, s.reqHi = min(s.reqLo, w), max(s.reqHi, w)
	}
	if me != nil && me.leaseWin == w {
		me.lease = max(0, me.lease-d)
		me.granted = max(0, me.granted-d)
	}
	if me != nil && me.leaseWin == w+1 {
		me.prevRes = max(0, me.prevRes-d) // reported: in the count now (notePrev)
	}
}

// view fills v for slot s; when applied, it first records the isolate's
// recency and demand and (strict mode) computes its new lease, or, for the
// isolate's last batch (end), gives back its leases. h is the isolate's
// high-water mark (its id and hash).
func (m *Merger) view(s *slot, h *hwmState, now int64, applied, end bool, v *wire.View) {
	isolate, hash := h.id, h.hash
	st, lim := s.st, s.st.lim
	P := lim.Period
	W := int64(0)
	if !lim.IsBucket() {
		W = max(limitmath.Window(now, P), s.maxWin)
	}
	var me *isoState
	back := false
	switch {
	case applied && !lim.Leased():
		m.markKey(st)
		st.sk.add(hash, limitmath.Window(now, P))
	case applied:
		m.markKey(st)
		m.isoEntries -= st.prune(now, m.keepFor(lim.Period))
		me = m.iso(st, s.key, isolate, now)
		if me != nil {
			back = me.seen > 0 && now-me.seen > 2*P // after a silence (grantWindow)
			if gap := now - me.seen; me.seen > 0 && gap > 0 {
				me.gap = (me.gap + gap) / 2
			}
			me.seen, me.hwm = now, h
			st.oldest = min(st.oldest, now) // in case the clock went back
			// Cost the last reply granted for requests refused in its
			// batch comes back as delta: the isolate decided them again
			// and admitted them. It asked for them once: count it once
			// (counted twice, a sparse isolate that waits looks twice as
			// busy, and so does the fleet's pace: see grantWindow).
			asked := s.demand - min(me.owed, s.delta, s.demand)
			me.demand = (me.demand + min(asked, wire.MaxLimit)*demandScale) / 2
			if asked > 0 && me.asks < measuredAsks {
				me.asks++
			}
			st.noteAsk(asked)
			if s.unmet > 0 && !frequent(me, lim.Period) {
				st.noteSparseAsk(s.unmet) // what it holds: mostly one request
			}
			if s.req && !lim.IsBucket() {
				// After prune: an entry dropped there and made again by
				// this batch observes nothing more (noteDropped did).
				st.noteRequest(me, s.reqLo, now)
				st.noteRequest(me, s.reqHi, now)
			}
			if asked > 0 && !lim.IsBucket() {
				st.noteRequest(me, s.maxWin, now) // the window it asked in
			}
		}
	case lim.Leased():
		if i := st.findIso(isolate); i >= 0 {
			me = &st.isos[i]
		}
	}
	if lim.IsBucket() {
		v.TAT = st.tat
	} else {
		v.Window = W
		v.Count, v.Prev = st.windowCounts(W)
	}
	boundView(v, lim, st.limitFor(s.key, now), now) // viewbound.go
	v.Isolates = max(st.recentIsolates(now), 1)
	v.Lease, v.Exhausted, v.Stand = -1, false, 0
	if !lim.Leased() {
		return
	}
	v.Lease = 0
	if me == nil {
		if !lim.IsBucket() {
			m.tellHeld(st, nil, W, now, v)
		}
		return
	}
	switch {
	case end:
		m.release(me, now)
	case applied:
		if lim.IsBucket() {
			m.grantBucket(st, me, s.key, now, s.unmet)
		} else {
			// Cost refused in a window that ended while the batch was on
			// its way (the isolate asked at the boundary) is asked again
			// now, in W: the isolate decides its held requests again when
			// the reply comes. Serve it in W rather than answer a grant of
			// nothing, which the isolate would take for a dry window.
			unmet := s.unmet
			st.notePrev(me, W, m.cutAt)
			v.Exhausted = m.grantWindow(st, me, s.key, W, now, unmet, s.delta, back) == 0
		}
	}
	switch {
	case lim.IsBucket():
		v.Lease = me.lease
	case me.leaseWin == W:
		v.Lease = me.granted
	}
	if applied {
		me.owed = min(s.unmet, max(v.Lease, 0))
	}
	me.tellStand(W, v)
	if !end {
		me.tellLife(v, m.cutAt, now)
	}
	if !lim.IsBucket() {
		m.tellHeld(st, me, W, now, v)
	}
}

// markKey stages st for the next Commit.
func (m *Merger) markKey(st *keyState) {
	if !st.dirty {
		st.dirty = true
		m.dirtyKeys = append(m.dirtyKeys, st)
	}
}

func (m *Merger) markHWM(h *hwmState) {
	if !h.dirty {
		h.dirty = true
		m.dirtyHWMs = append(m.dirtyHWMs, h)
	}
}

// iso returns the isolate's entry in st, the state of key, adding it within
// the bounds (when every entry a key may keep holds an active lease, one
// is charged and given up to make room: reclaim.go), or nil.
func (m *Merger) iso(st *keyState, key, id string, now int64) *isoState {
	active := limitmath.Window(now, st.lim.Period)
	if !st.lim.IsBucket() {
		active = max(active, st.win)
	}
	m.handOver(st, id)
	n := len(st.isos)
	room := func() bool { return m.isoEntries < m.opts.MaxIsolateEntries }
	is := st.iso(id, now, active, m.opts.MaxIsolatesPerKey, room)
	if is == nil && m.reclaim(st, key, active, now) {
		is = st.iso(id, now, active, m.opts.MaxIsolatesPerKey, room)
	}
	m.isoEntries += len(st.isos) - n
	return is
}

// loadKey returns the cached state of (lim, key), reading it from the store
// on a miss (or taking entry i of pf, when it is still current).
func (m *Merger) loadKey(lim *wire.LimiterConfig, key string, pf *Prefetched, i int, now int64) (*keyState, error) {
	m.buf = appendKeyStorageKey(m.buf[:0], lim.Name, key)
	if st, ok := m.keys[string(m.buf)]; ok {
		return st, nil
	}
	var v []byte
	var found bool
	if p, ok := m.prefetched(pf, i); ok {
		v, found = p.value, p.found
	} else {
		var err error
		if v, found, err = m.store.Get(m.buf); err != nil {
			return nil, fmt.Errorf("merge: read key %q of limiter %q: %w", key, lim.Name, err)
		}
	}
	st := newKeyState(lim, string(m.buf))
	if found {
		if err := st.decode(v, m.opts.MaxIsolatesPerKey); err != nil {
			// A record no version wrote (a disk's damage, a hand edit):
			// its counts are unknown. It starts again, counted and
			// logged (MergeStats.CorruptRecords), and the next commit
			// writes it whole. Refused, it failed every batch that named
			// the key, the other keys' deltas with it, and the key could
			// not even be reset.
			st = newKeyState(lim, string(m.buf))
			m.stats.CorruptRecords++
			m.markKey(st)
		}
		m.isoEntries += len(st.isos)
		if now > 0 && m.refit(st, key, now) {
			m.markKey(st)
		}
	}
	m.cacheKey(st.skey, st)
	m.residentAdd(st)
	return st, nil
}

// loadHWM returns the isolate's high-water mark (seq 0 when unknown).
func (m *Merger) loadHWM(isolate string) (*hwmState, error) {
	if h, ok := m.hwms[isolate]; ok {
		return h, nil
	}
	h, _, err := m.readHWM(isolate)
	if err != nil {
		return nil, err
	}
	m.hwms[isolate] = h
	return h, nil
}

// readHWM reads the isolate's high-water mark from the store, without
// caching it (seq 0 and found false when it has none). A mark that does
// not decode is an error wrapping errCorrupt.
func (m *Merger) readHWM(isolate string) (h *hwmState, found bool, err error) {
	v, found, err := m.store.Get([]byte(hwmStorageKey(isolate)))
	if err != nil {
		return nil, false, fmt.Errorf("merge: read high-water mark of isolate %q: %w", isolate, err)
	}
	h = &hwmState{id: isolate, hash: isoHash(isolate)}
	if found {
		if err := h.decode(v); err != nil {
			return nil, true, fmt.Errorf("merge: read high-water mark of isolate %q: %w", isolate, err)
		}
	}
	return h, found, nil
}
