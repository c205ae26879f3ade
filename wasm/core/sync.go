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
	if len(c.outBuf) > 0 {
		return append(dst, c.outBuf...), nil
	}
	if c.cfg.IsolateID == "" {
		return dst, ErrNoIsolateID
	}
	if len(c.dirty) == 0 {
		return dst, nil
	}
	b := wire.Batch{Version: wire.Version, Isolate: c.cfg.IsolateID, Seq: c.seq + 1, At: now}
	c.inflight = c.inflight[:0]
	n := 0
	for ; n < len(c.dirty) && len(b.Entries)+2 <= maxBatchDeltas; n++ {
		d := c.dirty[n]
		e := c.tab.at(d.idx)
		if e.gen != d.gen || !e.dirty {
			continue
		}
		e.dirty = false
		l := &c.lims[e.lim]
		name := l.cfg.Name
		if !l.bucket {
			e.roll(max64(now/l.cfg.Period, e.win))
		}
		key := e.keyString()
		if e.pCur > 0 || e.demand > 0 {
			b.Entries = append(b.Entries, wire.Delta{Limiter: name, Key: key, Window: e.win, Delta: e.pCur, Demand: e.demand})
			c.inflight = append(c.inflight, item{d, e.win, e.pCur})
		}
		if e.pPrev > 0 {
			b.Entries = append(b.Entries, wire.Delta{Limiter: name, Key: key, Window: e.win - 1, Delta: e.pPrev})
			c.inflight = append(c.inflight, item{d, e.win - 1, e.pPrev})
		}
		e.pCur, e.pPrev, e.demand = 0, 0, 0
	}
	c.dirty = append(c.dirty[:0], c.dirty[n:]...)
	if len(b.Entries) == 0 {
		return dst, nil
	}
	c.seq = b.Seq
	if c.cutAt > 0 && now > c.cutAt {
		c.gap = (c.gap + (now - c.cutAt)) / 2
	}
	c.cutAt = now
	c.stats.Batches++
	c.outBuf = b.AppendMsg(c.outBuf[:0])
	return append(dst, c.outBuf...), nil
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
	var rr wire.ReplyReader
	if err := rr.Reset(reply); err != nil {
		return errors.Join(ErrBadInput, err)
	}
	if len(c.outBuf) == 0 || rr.Seq != c.seq {
		return ErrStaleReply
	}
	// First pass: validate everything, so nothing is applied from a bad reply.
	var v wire.View
	for {
		lim, _, ok := rr.Next(&v)
		if !ok {
			break
		}
		if c.limiterIndexBytes(lim) < 0 {
			return errors.Join(ErrUnknownLimiter, errors.New("core: reply names limiter \""+string(lim)+"\""))
		}
	}
	if err := rr.Err(); err != nil {
		return errors.Join(ErrBadInput, err)
	}
	// The batch is acknowledged: its deltas are now in the global view.
	for _, it := range c.inflight {
		e := c.tab.at(it.idx)
		if e.gen != it.gen {
			continue
		}
		if it.win == e.bWin {
			e.ackedSince += it.delta
		}
		switch {
		case c.lims[e.lim].bucket || it.win == e.win:
			e.lCur -= it.delta
		case it.win == e.win-1:
			e.lPrev -= it.delta
		}
	}
	at := viewTime(c.cutAt, rr.At, now)
	if now > c.cutAt {
		c.rtt = (c.rtt + (now - c.cutAt)) / 2
	}
	rr.Reset(reply)
	for {
		lim, key, ok := rr.Next(&v)
		if !ok {
			break
		}
		li := c.limiterIndexBytes(lim)
		idx := c.tab.find(uint16(li), key, hashKey(uint16(li), key))
		if idx < 0 {
			continue
		}
		c.apply(&c.lims[li], c.tab.at(idx), &v, now, at)
	}
	c.inflight = c.inflight[:0]
	c.outBuf = c.outBuf[:0]
	c.stats.Replies++
	return nil
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
// this isolate's clock), applied at now.
func (c *Core) apply(l *limiter, e *entry, v *wire.View, now, at int64) {
	if v.Isolates > 0 {
		e.isolates = v.Isolates
	}
	if l.bucket {
		// The coordinator's TAT includes every acknowledged consumption;
		// add what was admitted here since the batch was cut.
		e.tat = max64(e.tat, addSat(v.TAT, mulDiv(e.pCur, l.cfg.Period, e.limit)))
	} else {
		// Estimate the other isolates' rate from how the count grew since
		// a base view of the same window at least two sync gaps old (other
		// isolates' batches arrive in lumps; a shorter span is noise).
		// Once the window is full the growth stops because everyone
		// denies, not because demand fell, so saturated views do not
		// update the rate.
		span := at - e.bAt
		switch {
		case !e.hasView || v.Window != e.bWin || v.Count >= e.limit:
			e.rebase(v, at)
		case span > 0 && span >= 2*c.gap:
			rate := float64(v.Count-e.bCount-e.ackedSince) / float64(span)
			if rate < 0 {
				rate = 0
			}
			if e.others == 0 {
				e.others = rate // the first estimate: nothing to smooth with
			} else {
				e.others = (e.others + rate) / 2
			}
			e.rebase(v, at)
		}
		e.vWin, e.vCur, e.vPrev = v.Window, v.Count, v.Prev
	}
	e.vAt = at
	e.hasView = true
	e.setExp(l, now)
	if l.strict && v.Lease >= 0 {
		pending := e.pCur
		if !l.bucket && v.Window != e.win {
			pending = 0
		}
		e.lease = v.Lease - pending
		e.leaseGrant = v.Lease
		e.leaseWin = v.Window
		e.hasLease = true
	}
}
