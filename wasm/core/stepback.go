package core

import "math"

// A host's clock can step back: the edge hosts run on the coordinator's
// time (clock.Offset, the JavaScript package's offset), and a host that
// could not read it at start, with its own clock ahead, steps back by that
// much at its first reading; an operating system clock can be set back
// too. Leases end by time (wire.View.Life from the batch's cut, on this
// isolate's clock), and the coordinator takes a lease back LeaseGrace
// (1 s by default) after the life it told. After a backward step of d, a
// lease whose end was set on the clock before it would stay usable d
// longer in real time, past the coordinator's record once d exceeds the
// grace: cost admitted then is cost the coordinator no longer reserves.
//
// A host that knows its steps says so: it runs the isolate on its own
// clock plus an offset, and tells the module each new offset (ClockOffset)
// before it passes a time read with it; a lower offset than the last is a
// step back by the difference, exactly. For the steps no host announces
// (an operating system clock set back), every call that brings a time
// remembers the latest (Core.latest), and a time more than backStep
// behind it is a step back by that much at least (the real time between
// the two calls is not known, so such a step is measured short by it).
// On a step back by d, every absolute
// time this isolate keeps for leases moves back with the clock: lease
// ends, dry spells, and the cut times of the batches whose replies may
// still come (the leases in them count from their cut), with each key's
// latest time (clamp), its views' times and (a step the host told) a
// bucket's arrival time. A
// lease then ends at the same real time as before the step, and a key
// decides on the new clock at once. Only windows do not move back: a key
// whose counters are in a window the new clock has not reached yet
// decides at that window's start until the clock gets there (its lease,
// granted for that window, ends no later in real time).

// backStep is the largest backward movement of the time a host passes (ns)
// that is taken as noise (calls timed before they got the module, out of
// order): far within any lease grace. A larger one moves lease times back
// by all of it.
const backStep = 100e6

// ClockOffset tells the isolate that the times the host passes from now on
// are its own clock plus off (ns; the coordinator's time, edge hosts'
// clock offset). A lower offset than the last told (0 at first) moves
// every lease time back by the difference (see above); a higher one
// changes no lease time (leases then end earlier in real time, which is
// safe).
//
// A step either way of more than backStep also moves the windows of the
// cost admitted before it (Core.rewindow, retime.go).
func (c *Core) ClockOffset(off int64) {
	if off < c.offset {
		d := c.offset - off
		if d < 0 {
			d = math.MaxInt64 // the difference overflowed: a step past any time kept
		}
		if d > backStep && d < maxRewindow && c.latest > 0 {
			c.rewindow(-d, max64(c.latest-d, 0))
		}
		c.shiftBack(d, true)
		c.latest = max64(c.latest-d, 0)
	} else if d := off - c.offset; d > backStep && d < maxRewindow && c.latest > 0 {
		c.rewindow(d, addSat(c.latest, d))
	}
	c.offset = off
}

// maxRewindow bounds the steps that move windows (ns, about 146 years): a
// larger one (an offset nobody's clock has) moves lease times only.
const maxRewindow = int64(1) << 62

// see records now, the time of a call, and moves lease times back on an
// unannounced step back (see above).
func (c *Core) see(now int64) {
	if now >= c.latest {
		c.latest = now
		return
	}
	if c.latest-now > backStep {
		c.shiftBack(c.latest-now, false)
		c.latest = now
	}
}

// shiftBack moves every absolute time kept for leases back by d > 0 ns.
// A bucket's times move only with a step the host told (told): a step
// seen from the times alone may be calls that took their time out of order
// (the Go host reads it before it takes the isolate), and moving the
// arrival time back would refill the bucket (a bucket keeps its latest
// time then, clamp); every other time moved back only ends a lease, a
// spell or a view's trust sooner.
func (c *Core) shiftBack(d int64, told bool) {
	c.cutAt = stepBack(c.cutAt, d)
	c.prevCut = stepBack(c.prevCut, d)
	// The cut times Recall puts back move with them.
	c.preCut.cutAt = stepBack(c.preCut.cutAt, d)
	c.preCut.prevCut = stepBack(c.preCut.prevCut, d)
	c.heard = stepBack(c.heard, d)
	for i := 0; i < c.tab.n; i++ {
		e := c.tab.at(int32(i))
		if !e.inUse() {
			continue
		}
		l := &c.lims[e.lim]
		if l.bucket {
			if told {
				e.last, e.tat = stepBack(e.last, d), stepBack(e.tat, d)
			}
		} else {
			// Not before the start of the window its counters are in:
			// windows never move back.
			e.last = max64(stepBack(e.last, d), e.win*l.cfg.Period)
		}
		e.vAt = stepBack(e.vAt, d)
		if rt := c.tab.rate(e); rt != nil {
			rt.bAt = stepBack(rt.bAt, d)
		}
		if l.strict && e.aux > 0 {
			s := c.tab.lease(e)
			s.expires = stepBack(s.expires, d)
			s.dryUntil = stepBack(s.dryUntil, d)
		}
	}
}

// stepBack moves the time t (ns) back by d; 0 (none) stays 0, and a time
// stays at least 1 (0 would mean none).
func stepBack(t, d int64) int64 {
	if t == 0 {
		return 0
	}
	return max64(t-d, 1)
}
