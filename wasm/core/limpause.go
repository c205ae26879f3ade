package core

// Limiter pauses (wire/pause.go): an operator's pause of a whole limiter,
// told in every reply while it holds. The isolate denies every key of a
// paused limiter until the pause ends or a reply no longer names it, keys
// it has not synced since included (told with the keys a batch names, an
// approximate limiter's first request on each other key was admitted).
// Its denials hold for the pause's length, so the recheck and heartbeats
// of long denials (resets.go) bring the replies that tell a resume.

// limPauses puts the reply's paused limiters in force at now: each
// limiter is paused until what the reply says, or not at all when it does
// not name it (the list is the coordinator's whole answer).
func (c *Core) limPauses(now int64) error {
	for i := range c.lims {
		c.lims[i].pausedUntil = 0
	}
	if !c.rr.HasPauses() {
		return nil
	}
	return c.rr.LimiterPauses(func(lim []byte, left int64) {
		if li := c.limiterIndexBytes(lim); li >= 0 {
			c.lims[li].pausedUntil = addSat(now, left)
		}
	})
}

// limPaused denies r, a decision of limiter lim at now, while lim is
// paused as a whole.
func (c *Core) limPaused(lim int, now int64, r *Result) {
	if until := c.lims[lim].pausedUntil; now < until && r.RetryAfter >= 0 {
		upDeny(r, until-now)
		c.sure = true
	}
}

// checkPause reports whether a paused limiter's left is one a coordinator
// could have sent: positive, within maxPause.
func checkPause(left int64) bool { return left > 0 && left <= maxPause }
