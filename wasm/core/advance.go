package core

// advance rolls windowed entry e (at idx) to the window of now (ns), the
// first step of every call that counts or reports its cost. Two things go
// with the window a roll leaves:
//   - the cost still pending in it, when the roll is of two windows or
//     more: kept aside for a step of the host's clock that brings its
//     window back (rolled.go);
//   - a strict key's asks of held requests not sent yet (leaseRec.unsent,
//     reask, amended): they were in the key's demand, which a roll clears
//     (they asked for the window left). A held request decided again in the
//     new window asks again there (edge/syncloop.Retry.NewWindow gives it
//     the reply to that ask). Kept, a request decided again right after a
//     reply was taken for one that asked already (record) and asked for
//     nothing: a unit admitted so under the new window's lease left the
//     key's demand at its unreported cost, the next request held asked for
//     1 where 2 were wanted, which the batch carried as no ask at all (not
//     urgent, demand not above the cost), and it was denied after its
//     retry wait with 81 of 100 left (simulator, under-0.5x, seed 1).
//
// A bucket is left alone. The check that now is still in e's window is
// all a decision pays: no division (with one, the native core's hot-key
// decision took 63-76 ns against 55-61 without advance).
func (c *Core) advance(idx int32, e *entry, now int64) {
	l := &c.lims[e.lim]
	if l.bucket || now < (e.win+1)*l.cfg.Period && now >= e.win*l.cfg.Period {
		return
	}
	c.advanceTo(idx, e, l, window(now, l.cfg.Period))
}

// advanceTo is advance's roll to window w (see above).
//
//go:noinline
func (c *Core) advanceTo(idx int32, e *entry, l *limiter, w int64) {
	if w <= e.win {
		return
	}
	if w > e.win+1 && (e.pCur > 0 || e.pPrev > 0) {
		c.keepRolled(idx, e)
	}
	if l.strict && e.aux > 0 {
		s := c.tab.lease(e)
		s.unsent, s.reask, s.amended = 0, 0, 0
	}
	e.roll(w)
}
