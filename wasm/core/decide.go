package core

import "math"

// evaluate computes the decision for cost at now. It changes no count; it
// moves e's local window forward to now's (roll) and, in a leased mode,
// starts the window's standing lease (evalLease), as any decision at now
// would.
func (c *Core) evaluate(lim int, e *entry, cost, now int64, r *Result) {
	l := &c.lims[lim]
	*r = Result{Limiter: lim, Limit: e.limit}
	if l.bucket {
		c.evalBucket(l, e, cost, now, r)
	} else {
		c.evalWindow(l, e, cost, now, r)
	}
	if l.strict {
		c.evalLease(l, e, cost, now, r)
	} else if l.readThru && r.Allowed && cost > 0 && c.cold(l, e, now) {
		r.Allowed, r.SyncRetry, r.SyncWanted = false, true, true
		r.RetryAfter = 1e6
	}
	if !r.Allowed && r.RetryAfter == 0 {
		r.RetryAfter = 1
	}
	if r.Allowed {
		r.RetryAfter = 0
	}
}

// evalWindow decides for fixed_window and sliding_window. The count of the
// current window is the global view plus the local cost not yet
// acknowledged, plus (approximate mode) the estimated cost other isolates
// admitted since the view. e is in the window of now (Core.advance).
func (c *Core) evalWindow(l *limiter, e *entry, cost, now int64, r *Result) {
	period := l.cfg.Period
	w := window(now, period)
	vCur, vPrev := e.view(w)
	cur := vCur + e.lCur
	start := w * period
	var est int64 // the estimate of the others' cost included in cur
	if others := c.tab.others(e); others > 0 {
		// Other isolates' cost not in the view: what they admitted since
		// their last batch before the view (on average half a sync gap
		// plus the one-way latency before the view was made), and since
		// the view; only in this window.
		lag := (c.gap + c.rtt) / 2
		// Arrivals are noisy: the estimate x of a count is padded by two
		// standard deviations of a Poisson count (2*sqrt(x)).
		x := others * float64(now-max64(e.vAt-lag, start))
		if x > 0 {
			x += 2 * math.Sqrt(x)
		}
		est = min64(max64(int64(x), 0), e.limit)
		cur += est
	}
	elapsed := now - start
	used := cur
	var prev int64
	if l.sliding {
		prev = vPrev + e.lPrev
		used = addSat(cur, mulDiv(prev, period-elapsed, period))
	}
	r.Reset = start + period
	r.Allowed = addSat(used, cost) <= e.limit
	// A denial the view alone justifies (without the estimate) will not
	// turn into an admission before the window ends: see record.
	c.sure = !r.Allowed && addSat(used-est, cost) > e.limit
	r.Remaining = max64(e.limit-used, 0)
	if r.Allowed {
		r.Remaining -= cost
	} else if cost > e.limit {
		r.RetryAfter = -1
	} else if l.sliding && addSat(cur, cost) <= e.limit && prev > 0 {
		// Wait until the previous window's weight has decayed enough:
		// prev*(period-elapsed')/period <= room.
		room := e.limit - cur - cost
		need := period - mulDiv(room, period, prev) // elapsed' at which it fits
		r.RetryAfter = max64(need-elapsed, 1)
	} else {
		r.RetryAfter = r.Reset - now
	}
	// Ask for an early sync when the unacknowledged local cost is a large
	// share of what this isolate may expect of the headroom (the headroom
	// split among the isolates that share the key).
	if !l.strict && e.pCur+cost > 0 {
		head := e.limit - (used - e.lCur)
		if head <= 0 || (e.lCur+cost)*2*e.isolates >= head {
			r.SyncWanted = r.Allowed
		}
	}
}

// evalBucket decides for token_bucket and gcra: a bucket of capacity burst
// refilled at limit per period, kept as a theoretical arrival time (TAT):
// the bucket is full again at TAT, and a cost fits if TAT+cost*T-now stays
// within burst*T, where T = period/limit is the time one unit takes to
// refill.
func (c *Core) evalBucket(l *limiter, e *entry, cost, now int64, r *Result) {
	period := l.cfg.Period
	burst := l.cfg.EffectiveBurst(e.limit)
	tol := mulDiv(burst, period, e.limit) // burst*T
	tat := max64(e.tat, now)
	next := addSat(tat, mulDiv(cost, period, e.limit))
	r.Allowed = next-now <= tol
	// Units available now: (tol - (tat-now)) / T.
	r.Remaining = mulDiv(tol-(tat-now), e.limit, period)
	r.Reset = tat
	if r.Allowed {
		r.Remaining = max64(r.Remaining-cost, 0)
		r.Reset = next
	} else if cost > burst {
		r.RetryAfter = -1
	} else {
		r.RetryAfter = next - tol - now
	}
	r.Limit = burst
	if !l.strict && e.pCur+cost > 0 {
		head := tol - (tat - now)
		pend := mulDiv(e.pCur+cost, period, e.limit)
		if head <= 0 || pend*2*e.isolates >= head {
			r.SyncWanted = r.Allowed
		}
	}
}

// evalLease applies strict mode on top of the algorithm's verdict: a cost is
// admitted only within the lease the coordinator granted for the current
// window, and the isolate asks for a new lease when half of it is used.
func (c *Core) evalLease(l *limiter, e *entry, cost, now int64, r *Result) {
	w := int64(0)
	if !l.bucket {
		w = window(now, l.cfg.Period)
	}
	s := c.tab.lease(e)
	lease := int64(0)
	switch {
	case s.expires != 0 && now >= s.expires:
		// Void: the coordinator takes an expired lease back.
	case s.hasLease && s.leaseWin == w:
		lease = max64(s.lease, 0)
	case s.hasLease && !l.bucket && s.leaseWin < w && w <= s.standUntil && s.standA > 0:
		// A new window under the standing lease (one of the windows it
		// stands in): no need to ask.
		s.lease, s.leaseGrant, s.leaseWin = s.standA, s.standA, w
		lease = s.standA
	}
	// A lease of this window that lapsed here with units left: the dry
	// spell's "exhausted" counted them, and its next batch gives them back
	// (lapse.go): a request asks, rather than being denied for the spell.
	lapsed := s.expires != 0 && now >= s.expires && s.hasLease && s.leaseWin == w && s.lease > 0
	dry := s.hasLease && s.dryWin == w && now < s.dryUntil && !l.bucket && !lapsed
	if cost > lease {
		if dry && r.Allowed {
			// The coordinator has no budget left this window (see
			// apply): deny here, quietly, until the window ends.
			c.sure = true
			r.RetryAfter = max64(min64(s.dryUntil, r.Reset)-now, 1)
			// A long window's spell (reservedDry) is rechecked however
			// little of it is left (recheck): over Redis, whose replies
			// carry no reset notices, a reset reached an isolate in the
			// last second of its spell only when the spell ended.
			c.dryLong = c.dryLong || dryBase(l.cfg.Period) >= minHold
		}
		if r.Allowed && !dry {
			// Denied only for want of a lease: a sync may bring one.
			r.RetryAfter = min64(max64(l.cfg.Period/100, 1e6), max64(r.Reset-now, 1))
			r.SyncRetry = true
		}
		if r.Allowed {
			r.Remaining += cost // the algorithm counted it; a denial consumes nothing
		}
		r.Allowed = false
	}
	// Remaining stays the global estimate (the algorithm's, from the
	// view and the unsynced local cost), not the lease: the lease is this
	// isolate's slice of it, and a denial for want of one says SyncRetry.
	// What others probably admitted under leases and did not report
	// (held: expired leases whole, live ones' paced use) counts as used;
	// the coordinator counts expired ones as spent (a key whose 4 units were spent under others' leases read
	// 100 remaining, where 96 were left).
	if !l.bucket && e.vWin == w && s.held > 0 {
		r.Remaining = max64(r.Remaining-s.held, 0)
	}
	// And what the others' pace says they admitted since the view (of
	// this window: since it was made; of an earlier one, a sparse
	// isolate's that stands over several windows: since this window
	// began), which no view shows yet: a view a few hundred ms old read
	// up to half the limit high on a key shared by 16 isolates.
	if !l.bucket && s.pace > 0 {
		since := now - w*l.cfg.Period
		switch {
		case e.vWin == w:
			since = now - e.vAt
		case e.vWin > w:
			since = 0 // a view of a later window (this clock behind the coordinator's)
		}
		if since > 0 {
			r.Remaining = max64(r.Remaining-mulDiv(s.pace, min64(since, l.cfg.Period), l.cfg.Period), 0)
		}
	}
	if cost > 0 && (lease-cost)*2 < s.leaseGrant || lease < cost || !s.hasLease {
		r.SyncWanted = !dry
	}
	if r.RetryAfter == math.MaxInt64 {
		r.RetryAfter = -1
	}
}

// peekCold reports whether a peek (cost 0) on e at now answers from no
// global estimate worth telling: e has no view, or none of the current
// window, or one older than two sync intervals (never for a standalone or
// stopped isolate: it has nobody to ask). An isolate that uses the key has
// a fresher one from its own syncs; one that only peeks (a dashboard, a
// header on another path) would otherwise answer the whole limit for ever
// (a key another isolate had spent 30 of 100 in: remaining 100 on every
// peek, and on an approximate key 95 where 35 were left). The peek then
// asks for a sync naming the key; on a limiter that coordinates (leased,
// or read-through) it also waits for the reply (Decide).
func (c *Core) peekCold(l *limiter, e *entry, now int64) bool {
	if c.cfg.Standalone || c.stopped {
		return false
	}
	if !e.hasView() {
		return true
	}
	if now-e.vAt > 2*c.syncInterval() {
		return true
	}
	return !l.bucket && e.vWin != window(now, l.cfg.Period)
}

// cold reports whether e holds no global state worth deciding on at now:
// no view (for buckets: none within the last period), or no estimate of
// the other isolates' rate and no view of the current window younger than
// two round trips.
func (c *Core) cold(l *limiter, e *entry, now int64) bool {
	if !e.hasView() {
		return true
	}
	if l.bucket {
		return now-e.vAt > l.cfg.Period
	}
	// Without a rate estimate (sparse traffic) a view is only as good as
	// it is fresh: older than two round trips, others may have admitted.
	return c.tab.others(e) == 0 && (e.vWin != window(now, l.cfg.Period) || now-e.vAt > 2*c.rtt+1e6)
}
