package host

import (
	"github.com/edgelimit/edgelimit/edge/failpolicy"
	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// stale reports whether the slot's view is stale at now (ns): it syncs
// with a coordinator and its last good sync is older than after (ns), the
// definition of syncloop.Scheduler.Stale (the scheduler itself belongs to
// the loop's goroutine).
func (s *slot) stale(now, after int64) bool {
	return s.loop != nil && now-s.lastOK.Load() > after
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
