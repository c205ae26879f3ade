package host

import (
	"context"
	"fmt"
	"time"

	"github.com/edgelimit/edgelimit/edge/failpolicy"
	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// stale reports whether the slot's view is stale at now (ns): it syncs
// with a coordinator, its last good sync is older than after (ns) and its
// syncs fail (syncloop.IsStale, the definition of Scheduler.Stale; the
// scheduler itself belongs to the loop's goroutine). An idle isolate is
// not stale.
func (s *slot) stale(now, after int64) bool {
	return s.loop != nil && syncloop.IsStale(now, s.lastOK.Load(), s.inFlightSince(), int(s.failures.Load()), after)
}

// inFlightSince returns when the attempt in flight began (ns): its batch's
// send, or its read of the coordinator's time (timeread.go); 0 when none
// is in flight.
func (s *slot) inFlightSince() int64 {
	if at := s.attemptAt.Load(); at != 0 {
		return at
	}
	return s.reading.Load()
}

// decideStale decides checks at now on a slot whose view is stale: it
// asks the loop for a probe of the coordinator (past the backoff, at most
// once per Sync.ProbeInterval), applies the fail policies (applyPolicies),
// asks the module, and lets the policy decide in its place a single check
// of a leased or read-through limiter the module denied for want of a
// lease or a view (failpolicy.Leased). A denial's Retry-After is at most
// Sync.ProbeInterval (capRetry): the next request probes again.
func (h *Host) decideStale(ctx context.Context, s *slot, checks []isolate.Check, now int64) (Decision, error) {
	h.probeSlot(s, now)
	out := Decision{Stale: true}
	d, denied := h.applyPolicies(s, checks, now)
	if !denied {
		var err error
		if d, _, _, err = s.decide(ctx, checks, now, false); err != nil {
			return out, err
		}
		if len(checks) == 1 {
			d = h.decideAlone(ctx, s, checks[0], d, now)
		}
	}
	out.Decision, out.Policy = h.capRetry(d), h.policies[d.Limiter]
	return out, nil
}

// refresh probes the coordinator before a request on s's stale view is
// decided by the fail policy, when the view is stale because syncs failed
// and no attempt began for twice Sync.ProbeInterval (a quiet host: its
// loop backs off up to BackoffMax between attempts, so the coordinator
// may have been answering for a while): it asks the loop for an attempt
// and waits for it to end, within RetryWait, as do the requests that come
// while that probe is on its way. An attempt that failed or was abandoned
// as hung is as recent as one begun (lastEnd): before, the request that
// came between an abandoned attempt and the next found the host quiet
// (the abandoned one began a second before) and waited for a probe that
// hung in turn, the whole RetryWait, with every request after it (a
// quarter of requests waited ~1 s while a coordinator hung). It reports
// whether it waited (the request is then decided at a new now: on a fresh
// view when the coordinator answered). Before, such a request was decided
// by the policy at once: under open, a burst on a full strict key after a
// quiet spell was admitted past the limit with the coordinator up. While
// requests keep
// coming through an outage they probe every ProbeInterval (probeSlot) and
// none of them waits.
func (h *Host) refresh(ctx context.Context, s *slot, now int64) bool {
	p, w := int64(h.opts.Sync.ProbeInterval), h.opts.RetryWait
	if s.loop == nil || p <= 0 || w <= 0 {
		return false
	}
	s.syncMu.Lock()
	ended := s.synced // before the kick: the probe's end closes it
	s.syncMu.Unlock()
	at := s.inFlightSince()
	switch until := s.refreshUntil.Load(); {
	case at != 0 && now < until: // the probe another request asked for
	case at == 0 && s.failures.Load() > 0 && now-max(s.lastStart.Load(), s.lastEnd.Load()) >= 2*p:
		if beforeProbeAsk != nil {
			beforeProbeAsk(s)
		}
		if s.refreshUntil.CompareAndSwap(until, now+int64(w)) {
			s.loop.Kick()
		} else if now >= s.refreshUntil.Load() {
			return false
		}
		// Else another request found the host quiet at the same moment
		// and asked for the probe first: wait for it too. Before, this
		// request was decided by the policy at once: one of 3 requests
		// at once on a full strict key after a quiet spell was admitted
		// under open, 11 counted of 10 (TestQuietProbeAskedAtOnce).
	default:
		return false
	}
	select {
	case <-ended:
	case <-s.clk.After(s.refreshUntil.Load() - now):
	case <-ctx.Done():
	}
	return true
}

// beforeProbeAsk, when set (tests only), runs in refresh between a quiet
// host's check and its asking for a probe: where a request racing with
// another comes.
var beforeProbeAsk func(s *slot)

// probeSlot asks s's loop for a probe of the coordinator at now, and first
// abandons an attempt in flight for longer than hungAfter: an attempt
// started in a partition that drops packets silently (or to a coordinator
// that hangs) waits out the whole sync timeout (5 s), the probes held
// behind it, and when the partition ended the next attempt, started in it
// too, waited as long: admissions resumed up to a sync timeout after the
// coordinator was back. The abandoned batch is sent again (the same
// sequence number: applied once).
func (h *Host) probeSlot(s *slot, now int64) {
	if at := s.attemptAt.Load(); at != 0 && now-at > h.hungAfter() && s.attemptAt.CompareAndSwap(at, 0) {
		// A failed attempt (the loop reports no error for one it was
		// told to end): the view stays stale until a sync succeeds.
		s.loop.AbandonAttempt()
		s.attemptFailed(fmt.Errorf("host: sync attempt abandoned after %v without an answer", time.Duration(now-at).Round(time.Millisecond)))
	} else if at := s.reading.Load(); at != 0 && now-at > h.hungAfter() && s.reading.CompareAndSwap(at, 0) {
		// The same for a read of the coordinator's time (timeread.go).
		s.loop.AbandonAttempt()
		s.attemptFailed(fmt.Errorf("host: reading the coordinator's time abandoned after %v without an answer", time.Duration(now-at).Round(time.Millisecond)))
	}
	s.loop.Kick()
}

// hungAfter is how long an attempt may be in flight before a request on a
// stale view abandons it (probe), ns: twice the probe interval, at least
// 1 s (a slow coordinator's reply still comes in time), at most the sync
// timeout.
func (h *Host) hungAfter() int64 {
	return min(max(2*int64(h.opts.Sync.ProbeInterval), int64(time.Second)), int64(h.opts.SyncTimeout))
}

// capRetry caps the Retry-After of a denial on a stale view, or for want
// of a lease or a view (SyncRetry: a sync may bring one), at
// Sync.ProbeInterval: the next probe or sync may change the answer, so the
// client is not sent away for a share of the period.
func (h *Host) capRetry(d isolate.Decision) isolate.Decision {
	if p := int64(h.opts.Sync.ProbeInterval); !d.Allowed && p > 0 && d.RetryAfter > p {
		d.RetryAfter = p
	}
	return d
}

// decideAlone returns the module's decision d of check c on a stale view,
// or an admission when the fail policy admits what the module denied only
// for want of a lease (see failpolicy.Leased). Such an admission is
// recorded in the module (isolate.Isolate.Admit), so the coordinator
// counts it once it is back.
func (h *Host) decideAlone(ctx context.Context, s *slot, c isolate.Check, d isolate.Decision, now int64) isolate.Decision {
	l := &h.opts.Config.Limiters[c.Limiter]
	if !l.Leased() && !l.ReadThrough {
		return d
	}
	q := h.quota(c)
	k := shareKey{c.Limiter, c.Key}
	s.mu.Lock()
	ok := failpolicy.Leased(h.policies[c.Limiter], s.share, k, c.Cost, q, now, d.Allowed, d.SyncRetry)
	rem := s.share.Remaining(k, q.Alone(), now)
	if h.policies[c.Limiter] == failpolicy.LocalShare {
		rem = s.share.Remaining(k, q, now)
	}
	var err error
	if ok && !d.Allowed {
		err = s.iso.Admit(ctx, c.Limiter, c.Key, c.Cost, now)
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("host: a fail-policy admission was not recorded; the coordinator will not count it", "err", err)
	}
	if !ok || d.Allowed {
		return d
	}
	return isolate.Decision{Allowed: true, Limiter: c.Limiter, Limit: q.Limit, Remaining: rem,
		Reset: (now/q.Period + 1) * q.Period}
}

// applyPolicies applies each check's fail policy on a stale slot at now,
// all or nothing: when one denies, the local shares taken by the others
// are given back. It returns the denial and true, or false when the
// request may go on to the module.
func (h *Host) applyPolicies(s *slot, checks []isolate.Check, now int64) (isolate.Decision, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range checks {
		p := h.policies[c.Limiter]
		if failpolicy.Apply(p, true, s.share, shareKey{c.Limiter, c.Key}, c.Cost, h.quota(c), now) == failpolicy.Pass {
			continue
		}
		for _, g := range checks[:i] {
			if h.policies[g.Limiter] == failpolicy.LocalShare {
				s.share.Give(shareKey{g.Limiter, g.Key}, g.Cost, h.quota(g), now)
			}
		}
		q := h.quota(c)
		reset := (now/q.Period + 1) * q.Period
		d := isolate.Decision{Limiter: c.Limiter, Limit: q.Limit, Reset: reset, RetryAfter: reset - now}
		if p == failpolicy.LocalShare {
			d.Remaining = s.share.Remaining(shareKey{c.Limiter, c.Key}, q, now)
		} else {
			// Closed until a sync succeeds: retry after one sync interval.
			d.RetryAfter = int64(h.opts.Sync.Interval)
		}
		if c.Cost > q.Limit {
			d.RetryAfter = -1
		}
		return d, true
	}
	return isolate.Decision{}, false
}

// quota is what a local share divides for check c.
func (h *Host) quota(c isolate.Check) failpolicy.Quota {
	l := &h.opts.Config.Limiters[c.Limiter]
	return failpolicy.Quota{Limit: l.LimitFor(c.Key), Period: l.Period, Isolates: int64(h.opts.ShareIsolates)}
}

// batchCost returns the cost a sync batch carries (the sum of its deltas),
// 0 if it does not decode.
func batchCost(b []byte) int64 {
	var bt wire.Batch
	if bt.UnmarshalMsg(b) != nil {
		return 0
	}
	var n int64
	for _, e := range bt.Entries {
		n += e.Delta
	}
	return n
}
