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
// which may deny a little early and never admits past a limit. A delta
// of the batch in flight whose counters moved stays in them when its reply
// comes (item.lwin): the coordinator counted it in the window the batch
// named, not in the one it moved to, where no view has it, and the other
// isolates would admit past the limit there; the next batch reports it
// again in the window it moved to (repend). It is then counted twice, in
// both windows: a step with a batch in flight makes the fleet deny early,
// never admit past a limit. Not when a step forward moved it to the next
// window only because the window's counters move whole, and the batch was
// cut (its units admitted) before that window began on the new clock
// (item.held): the coordinator counts it where it was admitted, and the
// key alone keeps it in the next window too. Views and leases are the
// coordinator's and keep their windows: a lease for a window the key is
// no longer in is not used there.
//
// Recall (the host's answer to a batch refused for its times: 400
// clock_skew, with nothing of it applied): the outstanding batch's deltas,
// asks, final denials and upstream signals go back to their keys (a key
// evicted since is inserted again), and the next SyncOut cuts them again,
// at the host's time now, under the same sequence number (the coordinator
// recorded nothing of the refused one: it checks a batch's times only for
// sequence numbers it has not applied, coordinator/merge/apply.go). A
// batch that was amended is taken back only when the host knows that
// every amendment of it was refused for its times too: one that was not,
// sent later, may have been applied (the coordinator's clock moved on
// meanwhile, or its answer was lost), and only the same batch resent is
// then answered as a retry.

// rewindow moves every windowed key's counters, and the windows of the
// batch in flight, after a step of the host's clock by d ns (new minus
// old); now is the time on the new clock.
func (c *Core) rewindow(d, now int64) {
	// Every item moves, denials too, its key's entry evicted since or
	// not (Recall inserts that key again in the item's window).
	for _, items := range [2][]item{c.inflight, c.denItems} {
		for k := range items {
			it := &items[k]
			if c.lims[it.lim].bucket {
				continue
			}
			p := c.lims[it.lim].cfg.Period
			first := it.lwin == it.win
			it.lwin = stepWindow(it.lwin, d, now, p)
			// Units the batch carries were admitted by its key's latest
			// decision (entry.last, before the entries move below; the
			// batch's cut, c.cutAt, for a key evicted since), on the
			// clock before a step forward: moved by a first step forward
			// to the next window only because the whole window's
			// counters move, they were all admitted in win when that
			// time on the new clock is still in it (a correction of a few
			// hundred ms, the usual one).
			last := c.cutAt
			if e := c.tab.at(it.idx); e.gen == it.gen {
				last = min64(e.last, c.cutAt)
			}
			it.held = first && d > 0 && it.lwin == it.win+1 && addSat(last, d) < it.lwin*p
		}
	}
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
	}
	c.restoreRolled(d, now)
}

// repend makes the delta of acknowledged item it, whose counters a step
// moved (it.lwin != it.win), pending again in entry e (at idx), in the
// window it moved to (see above): once the window it moved to is gone,
// or when every unit of it was admitted in the window the batch named
// (item.held), nothing. It is asked for too (pendAgain), so that a strict
// key's request held meanwhile still asks for its own cost (the batch's
// demand less its delta), and the next SyncOut cuts a batch for it
// (beatNow): a strict key's cost is otherwise reported lazily, as a lease
// reserved it, and no lease of the window it moved to did. Not after a
// graceful stop's last batch was cut: nothing is cut after it.
func (c *Core) repend(idx int32, it item, e *entry) {
	if c.stopped && !c.ending || it.held || !pendAgain(it, e) {
		return
	}
	c.stats.ReportedAgain += it.delta
	c.beatNow = true
	c.markDirty(idx, e)
}

// pendAgain makes item it's delta pending again in its key's entry e, in
// the window its counters are in (it.lwin), and asked for there; it
// reports false when that window is gone (neither e's current window nor
// the one before).
func pendAgain(it item, e *entry) bool {
	switch it.lwin {
	case e.win:
		e.pCur = addSat(e.pCur, it.delta)
		e.demand = addSat(e.demand, it.delta)
	case e.win - 1:
		e.pPrev = addSat(e.pPrev, it.delta)
	default:
		return false
	}
	return true
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
// the outstanding one was amended and amendsRefused is false: the host
// then resends it as it is.
var ErrNothingToRecall = errors.New("core: no batch to recall")

// Recall takes the outstanding batch back after the coordinator refused it
// for its times (HTTP 400 clock_skew) and applied nothing of it (see
// above): its deltas, the asks and final denials it carried, and its
// upstream signals go back to their keys, and the next SyncOut cuts a
// batch again under the same sequence number, at its own time. A batch
// that was amended (Amend) is taken back only when amendsRefused: the host
// knows every amendment of it was answered, each refused for its times
// (400 clock_skew); else ErrNothingToRecall (see above). now (ns) is the
// host's time, on the clock the refusal's reading put it on: a windowed
// key still in a window past the one of now (its clock stepped back
// without the host telling, ClockOffset) moves back to it, its previous
// window with it, so that the batch cut again names no window the
// coordinator refused.
func (c *Core) Recall(now int64, amendsRefused bool) error {
	c.see(now)
	if len(c.outBuf) == 0 || c.amendSeq == c.seq && !amendsRefused {
		return ErrNothingToRecall
	}
	if c.outEnd {
		// A graceful stop's last batch: cut again, it is the last one
		// again, naming every key it named (their leases were dropped
		// when it was cut: the coordinator gives them back with it).
		c.ending, c.outEnd = true, false
	}
	// The entries it puts the batch back in are pinned (fPin) until it
	// returns, the live ones before the first insert: a key evicted since
	// the cut, inserted again, evicts none of them (an evicted live entry
	// would lose what it admitted since the cut), nor a key of the batch
	// evicted and used again since (in a new entry).
	for _, items := range [2][]item{c.inflight, c.denItems} {
		for _, it := range items {
			if e := c.tab.at(it.idx); e.gen == it.gen {
				e.flags |= fPin
				continue
			}
			key := c.flightKeys[it.koff : it.koff+int32(it.klen)]
			if idx := c.tab.find(it.lim, key, hashKey(uint16(it.lim), key)); idx >= 0 {
				c.tab.at(idx).flags |= fPin
			}
		}
	}
	for _, it := range c.inflight {
		idx, e := c.flightEntry(it, now, true)
		e.flags |= fPin
		pendAgain(it, e)
		c.markDirty(idx, e)
	}
	for _, it := range c.denItems {
		idx, e := c.flightEntry(it, now, false)
		e.flags |= fPin
		e.den = addSat(e.den, it.delta)
		c.markDirty(idx, e)
	}
	for i := 0; i < c.tab.n; i++ {
		e := c.tab.at(int32(i))
		e.flags &^= fPin
		if !e.inUse() || c.lims[e.lim].bucket {
			continue
		}
		if w := window(now, c.lims[e.lim].cfg.Period); e.win > w {
			e.win, e.last = w, min64(e.last, now)
		}
		if !c.lims[e.lim].strict || e.aux == 0 {
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
	c.restoreRolled(0, now) // a key moved back to a window a roll left
	if len(c.upBuf) > 0 {
		c.upCarry, c.upCarryN = append(c.upCarry[:0], c.upEnt...), c.upN
	}
	c.inflight, c.denItems = c.inflight[:0], c.denItems[:0]
	c.outBuf = c.outBuf[:0]
	c.seq--
	c.handoverRecalled()
	p := &c.preCut
	c.cutAt, c.prevCut, c.late, c.amendPrev = p.cutAt, p.prevCut, p.late, p.amendPrev
	if c.amendSeq > c.seq {
		c.amendSeq = p.amendSeq
	}
	c.beatNow = c.beatNow || p.beatNow
	c.beatAsk = max(c.beatAsk, p.beatAsk)
	c.stats.Batches--
	return nil
}

// flightEntry returns the entry (and its index) the item of the
// outstanding batch it was cut from, at now (ns): the same one, or, when
// that key was evicted since, the key inserted again with the item's cost
// in its counters when cost (an item of inflight: unsynced, the refused
// batch carried it, so the batch cut again must; not for a denial's).
func (c *Core) flightEntry(it item, now int64, cost bool) (int32, *entry) {
	if e := c.tab.at(it.idx); e.gen == it.gen {
		return it.idx, e
	}
	key := c.flightKeys[it.koff : it.koff+int32(it.klen)]
	idx := c.lookup(int(it.lim), key, now)
	e := c.tab.at(idx)
	if !c.lims[it.lim].bucket && e.unsynced() == 0 && e.pending() == 0 {
		e.win = max64(e.win, it.lwin) // a new entry starts in the item's window
	}
	switch {
	case !cost: // a final denial's item: nothing was admitted
	case c.lims[it.lim].bucket || it.lwin == e.win:
		e.lCur = addSat(e.lCur, it.delta)
	case it.lwin == e.win-1:
		e.lPrev = addSat(e.lPrev, it.delta)
	}
	e.setExp(&c.lims[it.lim], now)
	return idx, e
}

// cutState is what a cut changes of the Core that Recall puts back.
type cutState struct {
	cutAt, prevCut, amendSeq int64
	late, amendPrev, beatNow bool
	beatAsk                  uint8
}
