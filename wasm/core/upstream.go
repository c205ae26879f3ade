package core

import (
	"errors"
	"strings"

	"github.com/edgelimit/edgelimit/wasm/limitmath"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// upState is what an isolate knows of one key's upstream: a pause, the
// circuit, an announced limit, and what it has still to tell the
// coordinator. Few keys have one, so it lives beside the entry (Core.ups,
// by entry index) rather than in it.
type upState struct {
	gen        uint32 // the entry's generation; a mismatch means the key left the table
	pauseUntil int64  // ns: decisions are denied until then
	circuit    uint8  // wire.CircuitClosed, CircuitOpen or CircuitHalfOpen
	probe      uint8  // half-open: probeNone, probeGranted or probeInFlight
	opens      uint8  // consecutive openings (the backoff doubles with each)
	fails      int64  // consecutive local failures
	openUntil  int64  // ns: an open circuit turns half-open then
	halfAt     int64  // ns: when the circuit turned half-open, or the probe was sent
	ownLimit   int64  // limit this isolate's upstream answers announced (0: none)
	fleetLimit int64  // limit the coordinator says several isolates saw announced (0: none)
	ownUntil   int64  // ns: ownLimit lapses then (the report horizon after the answer)
	fleetUntil int64  // ns: fleetLimit lapses then (its life, see wire.UpView.Life)
	heard      int64  // Stats.Replies when a reply last carried an upstream view of the key

	// To report in the next batch (wire.Signal).
	dirty  bool
	sPause int64 // ns time until which the upstream asked to pause (0: none)
	sFails int64
	sOK    int64
	sLimit int64
	sProbe bool
}

var errStatus = errors.New("core: status must be 0 (no answer) or an HTTP status")

const (
	probeNone     = 0
	probeGranted  = 1 // this isolate may send the probe
	probeInFlight = 2 // the probe was sent; its answer (Observe) decides
)

// upFor returns the upstream state of the entry at idx, or nil.
func (c *Core) upFor(idx int32, e *entry) *upState {
	u := c.ups[idx]
	if u != nil && u.gen != e.gen {
		delete(c.ups, idx) // the key left the table since
		return nil
	}
	return u
}

// upGet returns the upstream state of the entry at idx, creating it.
func (c *Core) upGet(idx int32, e *entry) *upState {
	if u := c.upFor(idx, e); u != nil {
		return u
	}
	if c.ups == nil {
		c.ups = make(map[int32]*upState)
	}
	u := &upState{gen: e.gen}
	c.ups[idx] = u
	return u
}

// markUp queues u for the next batch. An isolate that never syncs queues
// nothing; the queue drops references to keys that left the table when it
// outgrows the states it could name, so it stays bounded without syncs.
func (c *Core) markUp(idx int32, u *upState) {
	if u.dirty || c.cfg.Standalone {
		return
	}
	u.dirty = true
	if len(c.upDirty) >= 2*len(c.ups)+64 {
		n := 0
		for _, i := range c.upDirty {
			if v := c.upFor(i, c.tab.at(i)); v != nil && v.dirty {
				c.upDirty[n] = i
				n++
			}
		}
		c.upDirty = c.upDirty[:n]
	}
	c.upDirty = append(c.upDirty, idx)
}

func (c *Core) markUpUnless(local bool, idx int32, u *upState) {
	if !local {
		c.markUp(idx, u)
	}
}

// backoff is how long the circuit stays open after its n-th consecutive
// opening: the limiter's base doubled n times, with jitter (between half
// and all of it, drawn from the key and the time so isolates spread out).
func backoff(l *limiter, n uint8, seed uint64) int64 {
	return limitmath.Backoff(l.cfg.CircuitBase(), n, wire.MaxCircuitDoublings, seed)
}

// open opens u's circuit at now.
func (c *Core) open(l *limiter, u *upState, e *entry, now int64) {
	u.circuit, u.probe = wire.CircuitOpen, probeNone
	u.openUntil = now + backoff(l, u.opens, uint64(e.hash)<<32^uint64(now))
	if u.opens < 255 {
		u.opens++
	}
	c.stats.CircuitOpens++
}

// upCheck applies e's upstream state to the decision r at now: a pause or
// an open circuit denies; a half-open circuit lets one probe through (the
// fleet's, when the isolate syncs: the coordinator grants it).
func (c *Core) upCheck(lim int, idx int32, e *entry, cost, now int64, r *Result) {
	u := c.upFor(idx, e)
	if u == nil || r.RetryAfter < 0 {
		return
	}
	l := &c.lims[lim]
	if now < u.pauseUntil {
		upDeny(r, u.pauseUntil-now)
		c.sure = true
		return
	}
	if u.circuit == wire.CircuitOpen {
		if now < u.openUntil {
			upDeny(r, u.openUntil-now)
			c.sure = true
			return
		}
		u.circuit, u.probe, u.halfAt = wire.CircuitHalfOpen, probeNone, now
	}
	if u.circuit != wire.CircuitHalfOpen {
		return
	}
	// A probe whose answer never came (the request was dropped) is given
	// up after two open times; so is a wait for the fleet's grant (the
	// coordinator may be away).
	wait := 2 * (l.cfg.CircuitBase() << min(u.opens, wire.MaxCircuitDoublings))
	stale := now-u.halfAt > wait
	switch {
	case u.probe == probeInFlight && !stale:
		upDeny(r, max64(u.halfAt+wait-now, 1))
		c.sure = true
	case u.probe == probeGranted || c.cfg.Standalone || stale:
		if r.Allowed && cost > 0 {
			u.probe, u.halfAt = probeInFlight, now // this request is the probe
		}
	default:
		if !u.sProbe {
			u.sProbe = true
			c.markUp(idx, u)
		}
		upDeny(r, max64(c.rtt, 1e6))
		r.SyncWanted = true
		c.sure = true
	}
}

func upDeny(r *Result, d int64) {
	r.Allowed, r.SyncRetry = false, false
	r.Remaining = 0
	r.RetryAfter = max64(r.RetryAfter, d)
}

// Observe records what the upstream answered to a request of (lim, key) at
// now (ns): status (0: no answer) and headers. A 429, or a 503 with
// Retry-After, pauses the key here at once and, through the next batch,
// everywhere; a quota announced at 0 pauses it until its reset; an
// announced limit becomes the key's limit here (capped by the
// configuration, see wire.UpstreamConfig) and is reported; 5xx answers and
// transport failures count towards opening the key's circuit, and the
// answer to a half-open circuit's probe closes or reopens it. Header
// values that cannot be read are ignored (o.Ignored, Stats.UpstreamIgnored).
//
// With local set the answer changes this isolate only: nothing is
// reported (a host of several isolates gives an answer to each and lets
// one of them report it).
func (c *Core) Observe(lim int, key []byte, status int64, headers [][2]string, local bool, now int64, o *wire.Observed) error {
	if err := c.checkArgs(lim, key, 0, now); err != nil {
		c.stats.Errors++
		return err
	}
	if status < 0 || status > 999 {
		c.stats.Errors++
		return badInput(errStatus)
	}
	c.see(now)
	l := &c.lims[lim]
	idx := c.lookup(lim, key, now)
	e := c.tab.at(idx)
	now = c.clamp(e, now)
	h := parseHeaders(headers, now, l.cfg.Period)
	if h.limit > 0 && h.window > l.cfg.Period && mulDiv(h.limit, l.cfg.Period, h.window) < 1 {
		// Under one per period: rounded up to one, a quota of 1 a minute
		// on a limiter of a second admitted 60 a minute. Not followed;
		// the upstream's 429s pause the key instead.
		h.ignored = append(h.ignored, "ratelimit-policy: a quota under one per period of the limiter,"+
			" not followed (a period of at least the window over the quota follows it)")
		h.limit = -1
	}
	c.stats.UpstreamIgnored += int64(len(h.ignored))
	u := c.upGet(idx, e)
	*o = wire.Observed{Ignored: strings.Join(h.ignored, "; ")}
	if u.probe == probeInFlight {
		local = false // the answer to this isolate's probe: the fleet must hear it
	}
	if local {
		// Whatever is still to be reported stays as it was.
		p, f, k, n := u.sPause, u.sFails, u.sOK, u.sLimit
		defer func() {
			u.sPause, u.sFails, u.sOK, u.sLimit = p, f, k, n
			o.Sync = false
		}()
	}

	pause := int64(-1)
	switch {
	case status == 429 || status == 503 && h.retryAfter >= 0:
		pause = h.retryAfter
		if pause < 0 && h.reset > 0 {
			pause = h.reset
		}
		if pause < 0 {
			// No hint: back off on our own, with jitter.
			pause = backoff(l, 0, uint64(e.hash)^uint64(now))
		}
	case h.remaining == 0 && h.reset > 0:
		pause = h.reset // the quota is spent until its reset
	}
	if pause > 0 {
		pause = min64(pause, l.cfg.PauseCap())
		if now+pause > u.pauseUntil {
			u.pauseUntil = now + pause
			c.stats.UpstreamPauses++
			c.holdFor(now, pause)
		}
		u.sPause = max64(u.sPause, u.pauseUntil)
		o.Sync = true
		c.markUpUnless(local, idx, u)
	}

	threshold := l.cfg.CircuitThreshold()
	switch failed := status == 0 || status >= 500 && !(status == 503 && h.retryAfter >= 0); {
	case failed:
		u.fails++
		u.sFails++
		c.markUpUnless(local, idx, u)
		if u.circuit == wire.CircuitHalfOpen && u.probe == probeInFlight {
			c.open(l, u, e, now) // the probe failed
			o.Sync = true
		} else if u.circuit == wire.CircuitClosed && threshold > 0 && u.fails >= threshold {
			c.open(l, u, e, now)
			o.Sync = true
		}
	case status != 429 && status != 503:
		u.fails = 0
		u.sOK++
		u.sFails = 0
		c.markUpUnless(local, idx, u)
		if u.circuit == wire.CircuitHalfOpen && u.probe == probeInFlight {
			u.circuit, u.probe, u.opens = wire.CircuitClosed, probeNone, 0 // the probe passed
			o.Sync = true
		}
	}

	if h.limit > 0 && l.cfg.FollowAnnounced(h.remaining >= 0 && h.reset >= 0) {
		n := h.limit
		if h.window > 0 && h.window != l.cfg.Period {
			n = mulDiv(n, l.cfg.Period, h.window) // >= 1: see above
		}
		base := c.baseLimit(lim, key)
		n = min64(n, l.cfg.AnnouncedCap(base))
		if n != u.ownLimit {
			o.Sync = true
		}
		u.ownLimit, u.sLimit = n, n
		u.ownUntil = addSat(now, horizon(l))
		c.markUpUnless(local, idx, u)
		c.setLimit(lim, e, u, base)
	}
	o.Limit = e.limit
	o.Circuit = int64(u.circuit)
	if u.circuit == wire.CircuitOpen && now >= u.openUntil {
		o.Circuit = wire.CircuitHalfOpen
	}
	o.Paused = max64(u.pauseUntil-now, 0)
	return nil
}

// baseLimit is the configured limit of (lim, key): the override or the
// limiter's.
func (c *Core) baseLimit(lim int, key []byte) int64 {
	if o, ok := c.override(lim, key); ok {
		return o
	}
	return c.lims[lim].cfg.Limit
}

// adoptLimit makes n, the coordinator's limit for the key at idx (a view's
// Limit), the key's limit when this isolate's configuration says
// otherwise: answers (remaining, headers) and decisions follow the
// coordinator, which grants leases and counts by its own. An announced
// limit still applies under it. Each view that differs counts in
// Stats.ForeignLimits, for the host to say so.
func (c *Core) adoptLimit(lim int, idx int32, n int64) {
	e := c.tab.at(idx)
	base := c.baseLimit(lim, c.tab.keyBytes(e))
	if n == base {
		// The configured limit again: undo one adopted before (a
		// full-window notice tells a fleet's agreed limit, which nothing
		// else ends for an isolate without the key's upstream state: it
		// stayed at 3 of 10 for good).
		if e.limit != base {
			if u := c.upFor(idx, e); u != nil {
				c.setLimit(lim, e, u, base)
			} else {
				e.limit = base
			}
		}
		return
	}
	c.stats.ForeignLimits++
	if u := c.upFor(idx, e); u != nil {
		c.setLimit(lim, e, u, n)
		return
	}
	e.limit = n
}

// setLimit makes e's limit the announced one (the fleet's, else this
// isolate's own), capped by the configuration, or base when none was.
func (c *Core) setLimit(lim int, e *entry, u *upState, base int64) {
	n := u.fleetLimit
	if n == 0 {
		n = u.ownLimit
	}
	if n <= 0 {
		e.limit = base
		return
	}
	e.limit = min64(n, c.lims[lim].cfg.AnnouncedCap(base))
}

// appendSignals appends the signals of the keys whose upstream state
// changed since the last batch, as the batch's "up" array (nothing when
// none), and clears them. The times become durations from now (the
// batch's At). At most wire.MaxBatchEntries signals; the rest wait.
func (c *Core) appendSignals(dst []byte, now int64) []byte {
	dst = dst[:0]
	if len(c.upDirty) == 0 && c.upCarryN == 0 {
		c.upN = 0
		return dst
	}
	// A recalled batch's signals first (retime.go).
	ents := append(c.upEnt[:0], c.upCarry...)
	k, i := c.upCarryN, 0
	c.upCarry, c.upCarryN = c.upCarry[:0], 0
	for ; i < len(c.upDirty) && k < wire.MaxBatchEntries; i++ {
		idx := c.upDirty[i]
		e := c.tab.at(idx)
		u := c.upFor(idx, e)
		if u == nil || !u.dirty {
			continue // gone, or named twice (its index was reused)
		}
		pause := max64(u.sPause-now, 0)
		ents = wire.AppendSignal(ents, c.lims[e.lim].cfg.Name, c.tab.keyBytes(e), pause, u.sFails, u.sOK, u.sLimit, u.sProbe)
		u.dirty, u.sPause, u.sFails, u.sOK, u.sLimit, u.sProbe = false, 0, 0, 0, 0, false
		k++
	}
	c.upDirty = append(c.upDirty[:0], c.upDirty[i:]...)
	c.upEnt, c.upN = ents, k
	if k == 0 {
		return dst
	}
	return append(wire.AppendArrayHeader(dst, k), ents...)
}

// applyUpView applies the coordinator's view of a key's upstream, received
// at now.
func (c *Core) applyUpView(lim int, key []byte, v *wire.UpView, now int64) {
	h := hashKey(uint16(lim), key)
	idx := c.tab.find(uint8(lim), key, h)
	news := v.Pause > 0 || v.Circuit != wire.CircuitClosed || v.Limit > 0
	if idx < 0 {
		if !news {
			return
		}
		idx = c.insert(lim, key, h, now)
	}
	e := c.tab.at(idx)
	u := c.upFor(idx, e)
	if u == nil {
		if !news {
			return
		}
		u = c.upGet(idx, e)
	}
	u.heard = c.stats.Replies
	if v.Pause > 0 && now+v.Pause > u.pauseUntil {
		u.pauseUntil = now + min64(v.Pause, c.lims[lim].cfg.PauseCap())
		c.stats.UpstreamPauses++
		c.holdFor(now, u.pauseUntil-now)
	}
	switch v.Circuit {
	case wire.CircuitOpen:
		if u.circuit != wire.CircuitOpen {
			c.stats.CircuitOpens++
		}
		u.circuit, u.probe = wire.CircuitOpen, probeNone
		u.openUntil = now + min64(max64(v.Open, 0), c.lims[lim].cfg.CircuitBase()<<wire.MaxCircuitDoublings)
	case wire.CircuitHalfOpen:
		if u.circuit != wire.CircuitHalfOpen {
			u.circuit, u.probe, u.halfAt = wire.CircuitHalfOpen, probeNone, now
		}
		if v.Probe && u.probe == probeNone {
			u.probe, u.halfAt = probeGranted, now
		}
	case wire.CircuitClosed:
		if u.circuit != wire.CircuitClosed && u.sFails == 0 {
			u.circuit, u.probe, u.opens, u.fails = wire.CircuitClosed, probeNone, 0, 0
		}
	}
	if v.Limit > 0 {
		h := horizon(&c.lims[lim])
		if v.Life > 0 {
			h = min64(v.Life, h)
		}
		u.fleetUntil = addSat(now, h)
	}
	if v.Limit != u.fleetLimit {
		u.fleetLimit = max64(v.Limit, 0)
		c.setLimit(lim, e, u, c.baseLimit(lim, key))
	}
}

// horizon is how long an announced limit holds without news: the
// coordinator's report horizon, max(10 periods, 60 s).
func horizon(l *limiter) int64 { return max64(10*l.cfg.Period, 60e9) }

// upExpire drops the announced limits of the entry at idx that have
// lapsed at now, before a decision reads the entry's limit.
func (c *Core) upExpire(lim int, idx int32, e *entry, now int64) {
	u := c.upFor(idx, e)
	if u == nil {
		return
	}
	lapsed := false
	if u.fleetLimit > 0 && now >= u.fleetUntil {
		u.fleetLimit, lapsed = 0, true
	}
	if u.ownLimit > 0 && now >= u.ownUntil {
		u.ownLimit, lapsed = 0, true
	}
	if lapsed {
		c.setLimit(lim, e, u, c.baseLimit(lim, c.tab.keyBytes(e)))
	}
}

// fleetLimited reports whether the entry at idx runs under a limit the
// fleet told it (wire.UpView.Limit). Its denials are not quiet: they
// sync the key, so that the next honest reply can lift a limit that a bad
// one imposed, or one the coordinator has since dropped.
func (c *Core) fleetLimited(idx int32, e *entry) bool {
	u := c.upFor(idx, e)
	return u != nil && u.fleetLimit > 0
}

// unheard drops the fleet limit of each key of the reply's views that
// the reply gave no upstream view: the coordinator has no upstream state
// for it any more (it sends an upstream view for every key of a batch
// that has some).
//
//go:noinline
func (c *Core) unheard(views []replyView) {
	for i := range views {
		rv := &views[i]
		idx := c.tab.find(uint8(rv.lim), rv.key, hashKey(uint16(rv.lim), rv.key))
		if idx < 0 {
			continue
		}
		e := c.tab.at(idx)
		if u := c.upFor(idx, e); u != nil && u.fleetLimit > 0 && u.heard != c.stats.Replies {
			u.fleetLimit = 0
			c.setLimit(rv.lim, e, u, c.baseLimit(rv.lim, rv.key))
		}
	}
}
