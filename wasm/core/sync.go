package core

import (
	"errors"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// maxBatchDeltas bounds the deltas of one batch (each dirty key gives one or
// two); keys left over stay dirty for the next batch.
const maxBatchDeltas = wire.MaxBatchEntries

// SyncOut returns the batch to send to the coordinator, appended to dst, cut
// at time now (ns). While a batch is outstanding (no reply applied yet) it
// returns that same batch again, so retries reuse its sequence number. It
// returns dst unchanged (nothing appended) when there is nothing to sync.
func (c *Core) SyncOut(now int64, dst []byte) ([]byte, error) {
	c.see(now)
	if len(c.outBuf) > 0 {
		return append(dst, c.outBuf...), nil
	}
	if c.cfg.IsolateID == "" {
		return dst, ErrNoIsolateID
	}
	if c.ending {
		c.dirtyLeased()
	}
	beat := c.heartbeat(now) // a batch even with nothing to report (resets.go)
	handing := c.handing()   // every leased key goes in the batch
	if !beat && !handing && len(c.upDirty) == 0 && c.upCarryN == 0 && (len(c.dirty) == 0 || !c.anyUrgent(now)) {
		c.ending = false // nothing to report: a graceful stop needs no last batch
		return dst, nil
	}
	c.noteLapses(now) // they ride along with the batch (lapse.go)
	// Entries are encoded into c.entBuf first (their count goes in the
	// header), without building a wire.Batch: under TinyGo every
	// allocation on this path costs a share of a heap-wide GC.
	c.inflight, c.denItems, c.flightKeys = c.inflight[:0], c.denItems[:0], c.flightKeys[:0]
	ents := c.entBuf[:0]
	dens := c.denBody[:0] // the batch's denials, encoded (their count goes in front)
	count, ndens := 0, 0
	n := 0
	for ; n < len(c.dirty) && count+2 <= maxBatchDeltas; n++ {
		d := c.dirty[n]
		e := c.tab.at(d.idx)
		if e.gen != d.gen || !e.dirty() {
			continue
		}
		lapsed := e.flags&fLapse != 0
		e.flags &^= fDirty | fLapse
		l := &c.lims[e.lim]
		name := l.cfg.Name
		c.advance(d.idx, e, now)
		key := c.tab.keyBytes(e)
		it := item{ref: d, koff: int32(len(c.flightKeys)), klen: uint16(len(key)), lim: e.lim}
		kept := false
		if e.pCur > 0 || e.demand > 0 || (c.ending || handing) && l.strict || e.flags&fName != 0 || lapsed {
			ents = wire.AppendDelta(ents, name, key, e.win, e.pCur, e.demand)
			it.win, it.lwin, it.delta = e.win, e.win, e.pCur
			c.inflight = append(c.inflight, it)
			count++
			kept = true
		}
		if e.pPrev > 0 {
			ents = wire.AppendDelta(ents, name, key, e.win-1, e.pPrev, 0)
			it.win, it.lwin, it.delta = e.win-1, e.win-1, e.pPrev
			c.inflight = append(c.inflight, it)
			count++
			kept = true
		}
		if e.den > 0 {
			dens = wire.AppendKeyCost(dens, name, key, e.win, e.den)
			it.win, it.lwin, it.delta = e.win, e.win, e.den
			c.denItems = append(c.denItems, it)
			ndens++
			kept = true
		}
		if kept {
			c.flightKeys = append(c.flightKeys, key...)
		}
		if l.strict {
			c.tab.lease(e).asked = max64(e.demand-e.pCur, 0)
		}
		e.pCur, e.pPrev, e.demand = 0, 0, 0
	}
	c.entBuf, c.denBody = ents, dens
	c.denBuf = append(wire.AppendArrayHeader(c.denBuf[:0], ndens), dens...)
	c.upBuf = c.appendSignals(c.upBuf, now)
	// Denials ride along: with nothing else to send (an urgent entry
	// whose window ended before it was sent) no batch is cut for them,
	// and their entries stay on the list for the next one.
	cut := count > 0 || len(c.upBuf) > 0 || beat || handing
	k := 0
	for _, d := range c.dirty[:n] {
		e := c.tab.at(d.idx)
		if e.gen != d.gen || e.den == 0 {
			continue
		}
		if cut {
			e.den = 0
			continue
		}
		e.flags |= fDirty
		c.dirty[k] = d
		k++
	}
	c.dirty = append(c.dirty[:k], c.dirty[n:]...)
	if !cut {
		c.ending = false
		return dst, nil
	}
	end := c.ending && len(c.dirty) == 0 // the last batch of a graceful stop
	c.preCut = cutState{cutAt: c.cutAt, prevCut: c.prevCut, amendSeq: c.amendSeq, late: c.late, amendPrev: c.amendPrev, beatNow: c.beatNow, beatAsk: c.beatAsk}
	c.beatAsk, c.beatNow = 0, false // this batch brings the reset notices a heartbeat would
	c.seq++
	c.late = false
	if c.cutAt > 0 && now > c.cutAt {
		c.gap = (c.gap + (now - c.cutAt)) / 2
	}
	c.prevCut, c.cutAt, c.amendPrev = c.cutAt, now, c.seq > 1 && c.amendSeq == c.seq-1
	c.outAt = now
	c.stats.Batches++
	c.outEnd = end
	c.outBuf = wire.AppendBatchHeader(c.outBuf[:0], wire.Version, c.batchID(), c.seq, now, c.upBuf, c.denBuf, nil, end, c.rgen, wire.CapLimits|wire.CapSpans|wire.CapPace, count)
	c.outBuf = append(c.outBuf, ents...)
	c.handoverCut()
	if end {
		c.ending = false
		c.dropLeases()
	}
	return append(dst, c.outBuf...), nil
}

// anyUrgent reports whether a dirty key must be reported at now; when none
// must, no batch is cut (the keys stay dirty and ride along with the next
// batch).
func (c *Core) anyUrgent(now int64) bool {
	for _, d := range c.dirty {
		if e := c.tab.at(d.idx); e.gen == d.gen && e.dirty() && c.urgent(e, now) {
			return true
		}
	}
	return false
}

// urgent reports whether e's unsynced state must be reported at now. Only
// a strict fixed-window key may wait: the cost it admitted within a lease
// is already reserved at the coordinator (count + leases <= limit), and
// once its window is over it changes no decision (fixed windows do not
// look back), so it rides along with the next batch. Such a key is urgent
// when it was refused cost (it asks for a lease) or when a lease of
// several units is half spent in the current window (it asks for more
// ahead of need, and renews its standing lease). A sparse isolate then
// syncs about once per lease it needs instead of once per request plus
// once per report. The price: the coordinator's count of a window can lag
// what was admitted in it (never what it reserved).
//
// A limiter configured to follow its upstream (wire.UpstreamConfig set)
// reports at every sync too: the reply is how the isolate hears of a
// pause, a circuit or a limit another isolate learnt.
//
// Leases end by time, and this stays safe: the coordinator keeps an
// expired lease reserved, as spent, for the window it was alive in (see
// coordinator/merge/state.go, reservation), so cost reported after the expiry
// lands where it was reserved.
func (c *Core) urgent(e *entry, now int64) bool {
	l := &c.lims[e.lim]
	if e.pCur == 0 && e.pPrev == 0 && e.demand == 0 && e.flags&fName == 0 && !c.ending {
		return false // only final denials to report (record): they ride along
	}
	if !l.strict || l.bucket || l.sliding || e.demand > e.pCur || l.cfg.Upstream != nil || c.ending {
		return true
	}
	w := window(now, l.cfg.Period)
	s := c.tab.lease(e)
	dry := s.dryWin == w && now < s.dryUntil // asking for more is useless now
	return !dry && e.win == w && s.hasLease && s.leaseWin == w && s.leaseGrant >= 2 && s.lease*2 < s.leaseGrant
}

// Reincarnate starts a new incarnation of this isolate under the id newID:
// the host calls it when the coordinator refused the outstanding batch's
// sequence number (HTTP 409 seq_stale, seq_gap or seq_conflict: the id was
// reused by a restart, or another client used it; see
// coordinator/merge/sequence.go). Sequence numbers restart at 1, and the
// outstanding batch, if any, becomes batch 1 of newID with the same deltas
// and time, so the next SyncOut resends them and nothing is lost (the
// coordinator applied nothing of the refused batch). newID must be 1 to
// wire.MaxIsolateIDLen bytes and differ from the current id; secret is the
// new incarnation's secret (wire.Config.IsolateSecret: empty, or
// wire.MinSecretLen to wire.MaxSecretLen random bytes the host chose), else
// ErrBadInput. The leases the isolate holds are handed over to newID
// (handover.go): its batches name the incarnation left until one cut
// after this call, naming every leased key, is answered.
func (c *Core) Reincarnate(newID, secret string) error {
	if c.cfg.IsolateID == "" {
		return ErrNoIsolateID
	}
	if newID == "" || len(newID) > wire.MaxIsolateIDLen || newID == c.cfg.IsolateID {
		return badInput(errors.New("core: a new incarnation needs a new isolate id of 1 to 128 bytes"))
	}
	if secret != "" && !wire.ValidSecret(secret) {
		return badInput(errors.New("core: an isolate secret must be 16 to 64 bytes"))
	}
	// Batches of the incarnation being left were answered: all before the
	// outstanding one, or every one when none is outstanding.
	answered := c.seq > 1 || c.seq == 1 && len(c.outBuf) == 0
	oldID, oldSecret := c.cfg.IsolateID, c.cfg.IsolateSecret
	c.cfg.IsolateID, c.cfg.IsolateSecret = newID, secret
	c.startHandover(oldID, oldSecret, answered)
	amended := len(c.outBuf) > 0 && c.amendSeq == c.seq // the refused batch's amendment asked for held requests
	c.seq, c.late, c.amendSeq, c.amendPrev = 0, false, 0, false
	if len(c.outBuf) > 0 {
		c.seq = 1
		var ak []byte
		if amended {
			// Its asks ride in batch 1 itself: the amendment is void
			// with the old id, and the requests it asked for are held
			// still (they would wait a round trip more).
			ak = c.akArr
		}
		c.rebuildOut(ak)
	}
	return nil
}

// rebuildOut encodes the outstanding batch again into c.outBuf, under the
// isolate's id and c.seq, with the asks ak (the encoded array; nil for
// none): the same time (c.outAt: the cut's, as sent, even when the clock
// stepped back since; a batch resent with another time would be another
// batch to the coordinator), signals, denials and entries (c.entBuf still
// holds them encoded, one per inflight item). Reincarnate and Amend resend it so.
func (c *Core) rebuildOut(ak []byte) {
	c.outBuf = wire.AppendBatchHeader(c.outBuf[:0], wire.Version, c.batchID(), c.seq, c.outAt,
		c.upBuf, c.denBuf, ak, c.outEnd, c.rgen, wire.CapLimits|wire.CapSpans|wire.CapPace, len(c.inflight))
	c.outBuf = append(c.outBuf, c.entBuf...)
}

// Outstanding reports whether a batch awaits its reply.
func (c *Core) Outstanding() bool { return len(c.outBuf) > 0 }

// SyncIn applies the coordinator's reply (msgpack wire.Reply) at time now
// (ns): the acknowledged deltas leave the local counters, and the global
// view (and strict-mode lease) of every key in the reply replaces the
// cached one. A reply whose sequence number is not the outstanding batch's,
// or that names an unknown limiter, is refused whole. Keys this isolate no
// longer tracks (evicted or reset since) are skipped.
func (c *Core) SyncIn(reply []byte, now int64) error {
	if err := c.syncIn(reply, now); err != nil {
		c.stats.Errors++
		return err
	}
	return nil
}

func (c *Core) syncIn(reply []byte, now int64) error {
	c.see(now)
	rr := &c.rr
	if err := rr.Reset(reply); err != nil {
		return badInput(err)
	}
	// A second reply to the batch (another attempt's: an amendment's,
	// wire/amend.go) is taken until the next batch is cut: its leases,
	// like the first's, are what the isolate may admit from the batch's
	// cut on. Its deltas were acknowledged by the first, and of its views
	// only those newer than the key's are taken (the coordinator may have
	// made it before the first: an amendment that overtook its batch).
	//
	// An amendment's reply may also come after the next batch was cut
	// (prior): it is taken while that batch is in flight, for the views
	// and leases of strict windowed keys. Its leases count from the
	// amended batch's cut, so what the isolate admitted since (the
	// outstanding batch's deltas and what it admitted after) is taken off
	// them (apply). Once the outstanding batch's reply is applied it is
	// refused: the coordinator made that reply after the amendment's (an
	// amendment that reaches it after the next batch is refused as stale).
	late := len(c.outBuf) == 0
	prior := !late && c.amendPrev && rr.Seq+1 == c.seq
	if rr.Seq != c.seq && !prior || late && !c.late {
		return ErrStaleReply
	}
	late = late || prior
	// First pass: decode and validate everything into c.views (in place:
	// under TinyGo a struct copy is a call out of the module), so nothing
	// is applied from a bad reply and the reply is parsed once. Allocation
	// and error paths live in helpers that are not inlined, so that this
	// function needs no zeroed GC frame.
	n := 0
	for {
		if n == len(c.views) {
			c.growViews()
		}
		rv := &c.views[n]
		lim, key, ok := rr.Next(&rv.v)
		if !ok {
			break
		}
		if rv.lim = c.limiterIndexBytes(lim); rv.lim < 0 {
			if rv.v.Notice() {
				continue // a full-window notice of a limiter this isolate does not run
			}
			c.dropViews(n)
			return unknownLimiter(lim)
		}
		if !checkView(&c.lims[rv.lim], &rv.v, now) {
			c.dropViews(n)
			return badInput(errBadView)
		}
		rv.key = key
		n++
	}
	views := c.views[:n]
	if err := rr.Err(); err != nil {
		c.dropViews(n)
		return badInput(err)
	}
	if err := c.checkReplyRest(); err != nil {
		c.dropViews(n)
		return err
	}
	// The batch is acknowledged: its deltas are now in the global view
	// (a second reply: c.inflight is empty since the first, or is the
	// next batch's).
	if !prior {
		for _, it := range c.inflight {
			e := c.tab.at(it.idx)
			if e.gen != it.gen {
				if it.lwin != it.win && !c.lims[it.lim].bucket {
					// Its key was evicted since: inserted again with the
					// cost, which the coordinator lacks where it moved.
					idx, e := c.flightEntry(it, now, true)
					c.repend(idx, it, e)
				}
				continue
			}
			if rt := c.tab.rate(e); rt != nil && it.win == e.vWin {
				rt.bBase += it.delta // the base view's window is vWin
			}
			switch {
			case it.lwin != it.win:
				// A clock step moved its counters (retime.go): the
				// coordinator counted it in the window it was sent for,
				// not in the one it moved to, which the next batch
				// reports it in again (counted twice, on the denying
				// side).
				c.repend(it.idx, it, e)
			case c.lims[e.lim].bucket || it.win == e.win:
				e.lCur -= it.delta
			case it.win == e.win-1:
				e.lPrev -= it.delta
			}
		}
	}

	cut := c.cutAt
	if prior {
		cut = c.prevCut // the amended batch's: its views and leases count from there
	}
	at := viewTime(cut, rr.At, now)
	if now > c.cutAt && !late {
		c.rtt = (c.rtt + (now - c.cutAt)) / 2
	}
	if !late { // a second reply brings views and leases only: the first brought the rest
		c.applyResets(now) // before the views: they are newer than the resets they list
	}
	c.heard = now
	c.replies++
	c.prior = prior
	if prior {
		c.priorN = c.replies
	}
	for i := range views {
		rv := &views[i]
		l := &c.lims[rv.lim]
		h := hashKey(uint16(rv.lim), rv.key)
		idx := c.tab.find(uint8(rv.lim), rv.key, h)
		if idx < 0 && !late && c.fullNotice(rv.lim, rv.key, &rv.v, now) {
			idx = c.insert(rv.lim, rv.key, h, now)
		}
		if idx < 0 || prior && (!l.strict || l.bucket) {
			continue
		}
		if e := c.tab.at(idx); late && e.hasView() && e.vAt >= at {
			continue // older news than the first reply's view
		}
		c.apply(l, c.tab.at(idx), &rv.v, now, at, cut)
		c.watchLapse(l, idx)
		if rv.v.Limit > 0 {
			c.adoptLimit(rv.lim, idx, rv.v.Limit)
		}
	}
	if c.rr.HasUpstream() && !late { // most replies carry none: no closure to build
		if err := c.upViews(now); err != nil {
			c.dropViews(n)
			return err
		}
	}
	if len(c.ups) != 0 && !late {
		c.unheard(views)
	}
	if !late && !prior { // the reply to the batch: an amendment's may be made apart
		if err := c.limPauses(now); err != nil {
			c.dropViews(n)
			return err
		}
	}
	c.dropViews(n) // drop the references into reply
	if prior {
		c.prior, c.amendPrev = false, false
		return nil
	}
	c.inflight = c.inflight[:0]
	c.outBuf = c.outBuf[:0]
	c.late = true
	c.stats.Replies++
	c.handoverAnswered(rr.Seq)
	return nil
}

// upViews applies the reply's upstream views (after its views: nothing in
// them can fail the reply).
//
//go:noinline
func (c *Core) upViews(now int64) error {
	return c.rr.Upstream(func(lim, key []byte, v *wire.UpView) {
		if li := c.limiterIndexBytes(lim); li >= 0 {
			c.applyUpView(li, key, v, now)
		}
	})
}

// growViews adds a slot to c.views (whose length is its capacity).
//
//go:noinline
func (c *Core) growViews() {
	c.views = append(c.views, replyView{})
	c.views = c.views[:cap(c.views)]
}

// dropViews clears the first n views' references into a reply.
func (c *Core) dropViews(n int) {
	for i := range n {
		c.views[i].key = nil
	}
}

//go:noinline
func badInput(err error) error { return errors.Join(ErrBadInput, err) }

//go:noinline
func unknownLimiter(name []byte) error {
	return errors.Join(ErrUnknownLimiter, errors.New("core: reply names limiter \""+string(name)+"\""))
}

// replyView is one decoded entry of a reply; key aliases the reply.
type replyView struct {
	lim int
	key []byte
	v   wire.View
}

// viewTime estimates when, on this isolate's clock, the coordinator made a
// view: the reply's own time when it falls between the batch's cut and now
// (clocks agree), else the midpoint of the round trip.
func viewTime(cut, replyAt, now int64) int64 {
	switch {
	case cut <= replyAt && replyAt <= now:
		return replyAt
	case cut <= now:
		return cut + (now-cut)/2
	}
	return now
}

// apply replaces the cached global view of e with v, made at time at (ns,
// this isolate's clock), applied at now; a lease in v counts from the cut
// of the batch it answers (cut, ns).
func (c *Core) apply(l *limiter, e *entry, v *wire.View, now, at, cut int64) {
	if v.Isolates > 0 {
		e.isolates = v.Isolates
	}
	if l.bucket {
		// The coordinator's TAT includes every acknowledged consumption;
		// add what was admitted here since the batch was cut. It replaces
		// the local TAT rather than raising it: a bad reply's TAT is
		// undone by the next honest one.
		e.tat = addSat(v.TAT, mulDiv(e.pCur, l.cfg.Period, e.limit))
	} else {
		// Strict limiters do not estimate the others' rate (leases bound
		// it), and keep no rate record.
		if !l.strict {
			c.estimate(e, v, at)
		}
		e.vWin, e.vCur, e.vPrev = v.Window, v.Count, v.Prev
	}
	e.vAt = at
	named := e.flags&fName != 0
	e.flags = e.flags&^fName | fView
	e.setExp(l, now)
	if !l.strict {
		return
	}
	s := c.tab.lease(e)
	s.held, s.pace = v.Held, max64(v.Pace, 0)
	// The batch named the key for its lease that lapsed with units left
	// (lapse.go): cut after the lease was void, which the coordinator
	// then gives back.
	lapsed := !l.bucket && s.expires != 0 && cut >= s.expires && lapsedUnits(s, v.Window)
	if (named || lapsed) && !v.Exhausted && s.asked == 0 && !l.bucket {
		// A recheck (resets.go): the window has room again (a reset the
		// coordinator sent no notice of): the dry spell ends, the next
		// request asks. Or the lapsed units came back (the spell's
		// "exhausted" counted them): a request asks for them rather
		// than being denied for the spell (a day's window told a
		// hundredth of the day).
		s.dryWin, s.dryN = -1, 0
	}
	if v.Lease >= 0 {
		s.expires = leaseExpiry(cut, v.Life)
		s.longLife = v.Life >= l.cfg.Period
		// The standing lease is for the window after the view's, or
		// for each window through StandTo (a sparse isolate's, which
		// may next ask some windows later).
		s.standA, s.standUntil = max64(v.Stand, 0), max64(v.Window+1, v.StandTo)
		if s.hasLease && !l.bucket && v.Window < s.leaseWin && s.leaseWin <= window(now, l.cfg.Period) {
			// A reply made before a window ended, arriving after this
			// isolate began the next one on its standing lease: keep
			// that lease (the coordinator reserved it).
			if !c.prior {
				s.asked = 0
			}
			return
		}
		pending := e.pCur
		if !l.bucket && v.Window != e.win {
			pending = 0
		}
		if c.prior {
			// Admitted since the amended batch's cut: also what the
			// outstanding batch reports in the lease's window.
			for _, it := range c.inflight {
				if c.tab.at(it.idx) == e && it.win == v.Window {
					pending += it.delta
				}
			}
		}
		s.lease = v.Lease - pending
		s.leaseGrant = v.Lease
		s.leaseWin = v.Window
		s.hasLease = true
		// Asked for budget and granted none: the coordinator has none
		// left for this window (count + others' reservations = limit;
		// any free budget gives an asking isolate at least 1). Deny
		// locally for a dry spell instead of making every request wait
		// for a sync that can only refuse it. Others' reservations may
		// be given back as their demand falls, so it asks again after
		// the spell; each refusal in the same window doubles the spell
		// (a window under sustained overload stays exhausted).
		// A reply that says the window has nothing free left (every
		// unit counted or reserved) starts a dry spell too, which
		// matters once the isolate's own lease is spent (a spell, not
		// the rest of the window: reservations others leave unused
		// come back as they report).
		switch {
		case s.asked > 0 && v.Lease <= 0 && !l.bucket && !c.prior: // (s.asked is the outstanding batch's)
			n := uint8(0)
			if s.dryWin == v.Window && s.dryN < maxDryDoublings {
				n = s.dryN + 1
			}
			spell := max64(dryGaps*max64(c.gap, c.rtt), dryBaseOf(l, e, v)) << n
			s.dryWin, s.dryUntil, s.dryN = v.Window, now+spell, n
			c.holdFor(now, min64(spell, addSat(v.Window, 1)*l.cfg.Period-now)) // the spell ends with its window
		case v.Exhausted && !l.bucket:
			n := uint8(0)
			if s.dryWin == v.Window {
				n = s.dryN
			}
			spell := max64(dryGaps*max64(c.gap, c.rtt), dryBaseOf(l, e, v)) << n
			s.dryWin, s.dryUntil, s.dryN = v.Window, now+spell, n
		case v.Lease > 0 || v.Window != s.dryWin:
			s.dryWin, s.dryN = -1, 0
		}
	}
	if !c.prior {
		s.asked = 0
	}
}

// leaseExpiry returns when a lease told with life (wire.View.Life) in the
// reply to a batch cut at cut is void on this isolate's clock: life after
// the cut, which precedes the coordinator's grant, so the isolate stops
// before the coordinator takes the lease back. 0 (no life) never; a
// negative life (a bad reply) at once.
func leaseExpiry(cut, life int64) int64 {
	switch {
	case life == 0:
		return 0
	case life < 0:
		return max64(cut, 1)
	}
	return max64(addSat(cut, life), 1)
}

// estimate updates the rate record of e (of an approximate window limiter)
// from the view v, made at time at, before v replaces e's view; the first
// view gives e its record. It estimates the other isolates' rate from how
// the count grew since a base view of the same window (e.vWin) at least
// two sync gaps old (other isolates' batches arrive in lumps; a shorter
// span is noise). Once the window is full the growth stops because
// everyone denies, not because demand fell, so saturated views do not
// update the rate. Past 3/4 of the limit the others start to deny and
// their growth understates their pace: that rate is right for the rest of
// the window but not for the start of the next one, so a new window starts
// from the pace measured under 3/4 (a rate carried over from the denying
// part of a window left the estimate far short mid-window).
func (c *Core) estimate(e *entry, v *wire.View, at int64) {
	if !e.hasView() {
		rt := c.tab.newRate(e)
		rt.rebase(v, at)
		return
	}
	rt := c.tab.rate(e)
	span := at - rt.bAt
	switch {
	case v.Window == e.vWin && v.Count < rt.bBase:
		// The count fell within its window, which only a reset does (a
		// coordinator without reset notices, the shared mode, tells it
		// so): the rates measured on the old count are void, as forget
		// makes them.
		*rt = rateRec{}
		rt.rebase(v, at)
	case v.Window != e.vWin || v.Count >= e.limit:
		if v.Window > e.vWin && rt.pace > rt.others {
			rt.others = rt.pace
		}
		rt.rebase(v, at)
	case span > 0 && span >= 2*c.gap:
		rate := float64(v.Count-rt.bBase) / float64(span)
		if rate < 0 {
			rate = 0
		}
		rt.others = ewma(rt.others, rate)
		if v.Count*4 < e.limit*3 {
			rt.pace = ewma(rt.pace, rate)
		}
		rt.rebase(v, at)
	}
}

// dryGaps is how many sync gaps (or round trips, the longer; at least a
// hundredth of the period) an isolate that asked for budget and got none
// denies locally before it asks again: it saves a sync per denial under
// overload, at the price of seeing budget others give back a gap later
// (figures in the README, from edgelimit sim --corpus).
const dryGaps = 1

// maxDryDoublings caps the doublings of a dry spell (2^10 gaps).
const maxDryDoublings = 10

// maxDryBase caps the period's part of a dry spell before its doublings:
// 10 s (ns). A hundredth of the period alone kept a day's window dry for
// 14.4 minutes at every isolate told it was exhausted, while units others
// gave back (a lapsed lease comes back at its holder's next batch) sat
// unused; an isolate under sustained overload still asks at most once a
// spell, doubling.
const maxDryBase = 10e9

// dryBase returns the period's part of a dry spell for a window of period
// ns: a hundredth of it, at least 1 ms and at most maxDryBase.
func dryBase(period int64) int64 { return min64(max64(period/100, 1e6), maxDryBase) }

// reservedDry caps the period's part of a dry spell told by a view whose
// count is under the key's limit: 1 s (ns). The rest of such a window
// sits in other isolates' leases, which come back within their life (1 s
// by default) or at their holders' next batches; with the period's spell
// (10 s for an hour or a day), a new host's isolate refused while a
// sibling held a 100 a day key's last units denied for 10 s with them
// free. Its doublings still space the asks of a window whose holders died.
const reservedDry = 1e9

// dryBaseOf returns the period's part of the dry spell view v of e starts:
// dryBase, at most reservedDry while v counts under e's limit.
func dryBaseOf(l *limiter, e *entry, v *wire.View) int64 {
	b := dryBase(l.cfg.Period)
	if v.Count < e.limit {
		b = min64(b, reservedDry)
	}
	return b
}

// ewma averages x into avg with weight 1/2; the first estimate (avg 0) is
// x itself, with nothing to smooth with.
func ewma(avg, x float64) float64 {
	if avg == 0 {
		return x
	}
	return (avg + x) / 2
}
