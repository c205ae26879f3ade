package core

import (
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Reset notices (wire/resets.go). A key the coordinator reset (the admin
// API) must be admitted again by every isolate within two sync intervals,
// also by one that no longer syncs the key because it denies it from what
// it cached: a dry spell, a full window in its view, an upstream pause or
// limit the fleet told it. Each reply names the keys reset since the
// generation the isolate last applied; the isolate drops what it cached of
// them (forget). And an isolate that holds such a denial keeps syncing,
// with an empty batch when it has nothing to report (a heartbeat), so
// that it hears of a reset while it only denies. Heartbeats follow
// traffic, not the clock: once two requests were denied from cached
// denials since the last batch, the next regular sync is a heartbeat, so
// an isolate that denies a key hears of its reset within a sync interval
// and a round trip of its first request since, and an isolate without
// requests sends none.
// And a denial is trusted only while the isolate has heard from its
// coordinator within two sync intervals (Config.SyncInterval): past that, a
// request it would deny for a second or more is answered SyncRetry (the
// host syncs, with a heartbeat when there is nothing to report, and decides
// again), so every isolate admits a reset key within two sync intervals of
// the reset, also the first request of one that was idle since (recheck).
// (One per denied request cost 1.26 syncs per decision on the corpus's
// quota row: every admission there waits for a sync already.) (Heartbeats every
// sync interval while a denial was cached, the first design, cost up to
// 12.7 syncs per decision on the corpus's long-window rows.) A denial that
// lapses within minHold is not held: it ends by itself soon enough.

// maxHold bounds how long after a denial an isolate keeps sending
// heartbeats for it: 1 hour.
const maxHold = int64(3600e9)

// beatDenials is how many requests denied from cached denials since the
// last batch make a heartbeat due: 2.
const beatDenials = 2

// minHold is the shortest denial held with heartbeats: 1 s.
const minHold = int64(1e9)

// holdFor notes at now that a denial cached here lasts for d more ns (a
// retry-after): when d >= minHold, requests denied until then (at most
// maxHold) ask for heartbeats.
func (c *Core) holdFor(now, d int64) {
	if d >= minHold {
		c.hold = max64(c.hold, addSat(now, min64(d, maxHold)))
	}
}

// heartbeat reports whether SyncOut should cut a batch at now even with
// nothing to report: beatDenials requests were denied from denials cached
// here since the last batch and the isolate's coordinator sends reset
// notices (a generation), or a sign of life is due (alive); and it is not
// stopping. The host calls SyncOut at its
// sync interval (in Workers, during requests), so heartbeats come at most
// one per interval.
func (c *Core) heartbeat(now int64) bool {
	return (c.beatNow || c.beatAsk >= beatDenials && now < c.hold && c.rgen > 0 || c.alive(now)) && !c.stopped && !c.cfg.Standalone
}

// alive reports whether the isolate owes the coordinator a sign of life at
// now: Config.Heartbeat has passed since its last batch (or it has cut
// none yet).
func (c *Core) alive(now int64) bool {
	return c.cfg.Heartbeat > 0 && (c.cutAt == 0 || now-c.cutAt >= c.cfg.Heartbeat)
}

// recheck turns r, a denial at now for minHold or more (or for a long
// window's dry spell, however short: Core.dryLong), into a request to
// sync first (SyncRetry, SyncWanted) when no reply was applied within two
// sync intervals: the denial may come from a count, dry spell or pause the
// coordinator has reset since. After the sync the host decides again, on
// a view at most a round trip old. A coordinator without reset notices
// (the shared mode) needs it as much: the denied cost makes the batch name
// the key, and its reply carries the key's view.
// It reports whether it did; the caller names the denied keys (name).
func (c *Core) recheck(now int64, r *Result) bool {
	if r.SyncRetry || r.RetryAfter < minHold && !c.dryLong || c.heard == 0 || c.stopped || c.cfg.Standalone {
		return false
	}
	if now-c.heard <= 2*c.syncInterval() {
		return false
	}
	r.SyncRetry, r.SyncWanted = true, true
	c.beatNow = true
	return true
}

// syncInterval returns the hosts' sync interval the isolate was configured
// with (wire.Config.SyncInterval; 0: wire.DefaultSyncInterval), ns.
func (c *Core) syncInterval() int64 {
	if iv := c.cfg.SyncInterval; iv != 0 {
		return iv
	}
	return wire.DefaultSyncInterval
}

// name puts the entry at idx in the next batch even with nothing to
// report (an entry of cost 0 and demand 0), so that the reply carries its
// key's view: a recheck without reset notices learns of a reset from it.
// The reply's view clears the flag (apply).
func (c *Core) name(idx int32) {
	e := c.tab.at(idx)
	e.flags |= fName
	if !e.dirty() {
		e.flags |= fDirty
		c.dirty = append(c.dirty, ref{idx, e.gen})
	}
}

// askBeat notes at now that a request was denied: when the denial is
// cached here (hold), it counts towards a heartbeat.
func (c *Core) askBeat(now int64) {
	if now < c.hold && c.beatAsk < beatDenials {
		c.beatAsk++
	}
}

// applyResets applies the reply's reset notices at now: each named key
// this isolate tracks forgets what it cached from the coordinator, and
// ResetAll drops every dry spell and fleet limit.
//
//go:noinline
func (c *Core) applyResets(now int64) {
	rr := &c.rr
	if rr.HasResets() {
		_ = rr.Resets(func(lim, key []byte) { // checked by checkReplyRest
			li := c.limiterIndexBytes(lim)
			if li < 0 {
				return // a limiter this isolate does not run
			}
			if idx := c.tab.find(uint8(li), key, hashKey(uint16(li), key)); idx >= 0 {
				c.forget(idx, c.tab.at(idx), now)
			}
		})
	}
	if rr.ResetAll {
		for i := 0; i < c.tab.n; i++ {
			e := c.tab.at(int32(i))
			if !e.inUse() {
				continue
			}
			if c.lims[e.lim].strict {
				s := c.tab.lease(e)
				s.dryWin, s.dryN = -1, 0
			}
			if u := c.upFor(int32(i), e); u != nil && u.fleetLimit > 0 {
				u.fleetLimit = 0
				c.setLimit(int(e.lim), e, u, c.baseLimit(int(e.lim), c.tab.keyBytes(e)))
			}
		}
	}
	c.rgen = rr.ResetGen
}

// forget drops what the entry at idx cached of the coordinator's state of
// its key, which the coordinator has reset: the global counts or TAT, the
// estimate of the others' rate, the lease and dry spell, the upstream pause, circuit and limits (the
// coordinator reset those too). The cost admitted here and not yet
// acknowledged stays: it is reported and counted after the reset.
func (c *Core) forget(idx int32, e *entry, now int64) {
	l := &c.lims[e.lim]
	e.vCur, e.vPrev = 0, 0
	if rt := c.tab.rate(e); rt != nil {
		*rt = rateRec{bAt: now} // the others' rate was measured on the old count
	}
	if l.bucket {
		e.tat = 0
		if e.pCur > 0 {
			e.tat = limitmath.AdvanceTAT(0, now, e.pCur, l.cfg.Period, e.limit)
		}
	}
	if l.strict {
		*c.tab.lease(e) = leaseRec{dryWin: -1}
	}
	if c.upFor(idx, e) != nil {
		delete(c.ups, idx)
	}
	e.limit = c.baseLimit(int(e.lim), c.tab.keyBytes(e))
}
