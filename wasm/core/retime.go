package core

import "errors"

// A host that learns the coordinator's time late (it could not read it at
// start, and decided alone meanwhile) or whose coordinator's clock steps
// (another coordinator with another clock, a clock set) moves its clock
// by the step at once (ClockOffset). The cost its keys admitted before
// the step is counted in windows of the clock before it: a step back of
// more than the coordinator's allowed skew leaves them in windows the
// coordinator refuses (400 clock_skew) until its own clock gets there, and
// every batch with them, whatever else it reports; a step forward leaves
// them in windows the coordinator has left, where they no longer count
// against the window they were admitted in. Two operations put them
// where they belong.
//
// Rewindow (on every step the host tells of more than backStep): the
// counters of each windowed key move from the window w they are in to the
// latest window of the new clock that the old window's cost can have
// been admitted in: the one holding w's end on the new clock, and never
// past the new clock's current window. That is conservative: cost spread
// over two windows of the new clock is counted whole in the later one,
// which may deny a little early and never admits past a limit. The
// deltas of the batch in flight move with them, so that its reply takes
// them off the counters they are in now. Views and leases are the
// coordinator's and keep their windows: a lease for a window the key is
// no longer in is not used there.
//
// Recall (the host's answer to a batch refused for its times: 400
// clock_skew, with nothing of it applied): the outstanding batch's deltas,
// asks, final denials and upstream signals go back to their keys, and the
// next SyncOut cuts them again, at the host's time now, under the same
// sequence number (the coordinator recorded nothing of the refused one).

// rewindow moves every windowed key's counters, and the windows of the
// batch in flight, after a step of the host's clock by d ns (new minus
// old); now is the time on the new clock.
func (c *Core) rewindow(d, now int64) {
	moved := false
	for i := 0; i < c.tab.n; i++ {
		e := c.tab.at(int32(i))
		if !e.inUse() || c.lims[e.lim].bucket {
			continue
		}
		l := &c.lims[e.lim]
		w := stepWindow(e.win, d, now, l.cfg.Period)
		if w == e.win {
			continue
		}
		if stepWindow(e.win-1, d, now, l.cfg.Period) == w {
			// Both windows land in one: prev joins cur.
			e.lCur, e.lPrev = addSat(e.lCur, e.lPrev), 0
			e.pCur, e.pPrev = addSat(e.pCur, e.pPrev), 0
		}
		e.win = w
		if d > 0 {
			e.last = max64(e.last, w*l.cfg.Period) // a key's latest time is in its window
		}
		moved = true
	}
	if !moved {
		return
	}
	for k := range c.inflight {
		it := &c.inflight[k]
		if e := c.tab.at(it.idx); e.gen == it.gen && !c.lims[e.lim].bucket {
			it.win = stepWindow(it.win, d, now, c.lims[e.lim].cfg.Period)
		}
	}
}

// stepWindow is the window of period (ns) that window w of a clock that
// then stepped by d ns maps to on the new clock (see above): the one that
// holds w's last instant moved by d, at most the window of now (ns, on
// the new clock).
func stepWindow(w, d, now, period int64) int64 {
	end := addSat(addSat(w, 1)*period-1, d)
	return min64(window(max64(end, 0), period), window(now, period))
}

// ErrNothingToRecall is Recall's answer when no batch is outstanding, or
// the outstanding one is a graceful stop's last (its leases were dropped
// when it was cut): the host then resends it as it is.
var ErrNothingToRecall = errors.New("core: no batch to recall")

// Recall takes the outstanding batch back after the coordinator refused it
// for its times (HTTP 400 clock_skew) and applied nothing of it (see
// above): its deltas, the asks and final denials it carried, and its
// upstream signals go back to their keys, and the next SyncOut cuts a
// batch again under the same sequence number, at its own time. An
// amendment of the refused batch is void with it: its asks are in the
// keys' demand already and ride in the new batch. now (ns) is the host's
// time, on the clock the refusal's reading put it on: a windowed key still
// in a window past the one of now (its clock stepped back without the host
// telling, ClockOffset) moves back to it, its previous window with it, so
// that the batch cut again names no window the coordinator refused.
func (c *Core) Recall(now int64) error {
	c.see(now)
	if len(c.outBuf) == 0 || c.outEnd {
		return ErrNothingToRecall
	}
	for _, it := range c.inflight {
		e := c.tab.at(it.idx)
		if e.gen != it.gen {
			continue // evicted since: nothing of it is kept
		}
		switch it.win {
		case e.win:
			e.pCur = addSat(e.pCur, it.delta)
			e.demand = addSat(e.demand, it.delta)
		case e.win - 1:
			e.pPrev = addSat(e.pPrev, it.delta)
		}
		c.markDirty(it.idx, e)
	}
	for i := 0; i < c.tab.n; i++ {
		e := c.tab.at(int32(i))
		if !e.inUse() || c.lims[e.lim].bucket {
			continue
		}
		if w := window(now, c.lims[e.lim].cfg.Period); e.win > w {
			e.win, e.last = w, min64(e.last, now)
		}
	}
	for _, it := range c.denItems {
		if e := c.tab.at(it.idx); e.gen == it.gen {
			e.den = addSat(e.den, it.delta)
			c.markDirty(it.idx, e)
		}
	}
	for i := 0; i < c.tab.n; i++ {
		e := c.tab.at(int32(i))
		if !e.inUse() || !c.lims[e.lim].strict || e.aux == 0 {
			continue
		}
		s := c.tab.lease(e)
		if s.asked > 0 {
			e.demand = addSat(e.demand, s.asked)
			c.markDirty(int32(i), e)
		}
		s.asked = 0
		// The requests held since the cut asked in the keys' demand:
		// the batch cut again carries them.
		s.unsent, s.amended, s.unsentSeq = 0, 0, c.seq-1
	}
	if len(c.upBuf) > 0 {
		c.upCarry, c.upCarryN = append(c.upCarry[:0], c.upEnt...), c.upN
	}
	c.inflight, c.denItems = c.inflight[:0], c.denItems[:0]
	c.outBuf = c.outBuf[:0]
	c.seq--
	p := &c.preCut
	c.cutAt, c.prevCut, c.late, c.amendPrev = p.cutAt, p.prevCut, p.late, p.amendPrev
	if c.amendSeq > c.seq {
		c.amendSeq = p.amendSeq
	}
	c.beatNow = c.beatNow || p.beatNow
	c.stats.Batches--
	return nil
}

// cutState is what a cut changes of the Core that Recall puts back.
type cutState struct {
	cutAt, prevCut, amendSeq int64
	late, amendPrev, beatNow bool
}
