package core

// A windowed key's counters roll with its window (entry.roll): a roll of
// two windows or more drops the cost still pending in the windows it
// leaves, which the coordinator would count only in windows gone. That is
// right when time passed (the coordinator was out of reach for a window)
// and wrong when the host's clock jumped forward and then steps back at
// its next reading (an operating system clock set forward under a host,
// which clock.Steady follows, or a host that brings its own clock): the
// units admitted before the jump were admitted in the coordinator's
// current window, and dropped there they were never counted (an edge host
// counted 28 of 29 units in CI, TestHostClockJumpRecallsTheRefusedBatch).
//
// So the pending cost a roll drops is kept aside (Core.advance; Core.rolled,
// the latest maxRolled), and a step the host tells (rewindow) or a recall
// puts it back where its window is the key's current or previous one
// again: on its own window (the jump: the units were admitted on the clock
// before it) or on the window the step maps it to (a clock wrong since
// before the units were admitted). Put back, it is pending again and
// reported with the next batch. Kept aside, it counts nowhere: a key whose
// clock never comes back keeps today's rule, and a key evicted since drops
// it.

// maxRolled bounds the rolls whose dropped cost is kept aside: the latest
// are kept, an older one is dropped for a new one.
const maxRolled = 16

// rolledCost is the cost a roll dropped from one key: pending in window
// win (cur) and in the window before it (prev).
type rolledCost struct {
	ref
	win, cur, prev int64
}

// keepRolled keeps e's pending cost aside before a roll drops it.
//
//go:noinline
func (c *Core) keepRolled(idx int32, e *entry) {
	if len(c.rolled) == maxRolled {
		copy(c.rolled, c.rolled[1:])
		c.rolled = c.rolled[:maxRolled-1]
	}
	c.rolled = append(c.rolled, rolledCost{ref: ref{idx, e.gen}, win: e.win, cur: e.pCur, prev: e.pPrev})
}

// restoreRolled puts the cost kept aside back in its key's counters after
// a step of the host's clock by d ns (0: none told), at now (ns, the new
// clock), where its window, as it is or moved by the step (stepWindow), is
// the key's current or previous window (see above); what the key no
// longer holds (evicted) is dropped, the rest is kept.
func (c *Core) restoreRolled(d, now int64) {
	k := 0
	for _, r := range c.rolled {
		e := c.tab.at(r.idx)
		if e.gen != r.gen || !e.inUse() {
			continue
		}
		p := c.lims[e.lim].cfg.Period
		if r.cur > 0 && c.putBack(r.idx, e, r.win, r.cur, d, now, p) {
			r.cur = 0
		}
		if r.prev > 0 && c.putBack(r.idx, e, r.win-1, r.prev, d, now, p) {
			r.prev = 0
		}
		if r.cur > 0 || r.prev > 0 {
			c.rolled[k] = r
			k++
		}
	}
	c.rolled = c.rolled[:k]
}

// putBack adds cost n of window w to e's counters (admitted and pending)
// where w, or w moved by the step d, is e's current or previous window; it
// reports whether it did.
func (c *Core) putBack(idx int32, e *entry, w, n, d, now, p int64) bool {
	for _, x := range [2]int64{w, stepWindow(w, d, now, p)} {
		switch x {
		case e.win:
			e.lCur, e.pCur = addSat(e.lCur, n), addSat(e.pCur, n)
		case e.win - 1:
			e.lPrev, e.pPrev = addSat(e.lPrev, n), addSat(e.pPrev, n)
		default:
			continue
		}
		c.beatNow = true
		c.markDirty(idx, e)
		return true
	}
	return false
}
