package sim

import (
	"fmt"
	"strings"

	"github.com/edgelimit/edgelimit/edge/failpolicy"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// strategy is one way of deciding requests that the simulator compares:
// it says what nodes it runs and decides each request on them.
type strategy interface {
	// mode is the limiters' mode in the strategy's isolates.
	mode() string
	// nodes is how many nodes (isolates, counters) it runs.
	nodes(isolates, locations int) int
	// syncs reports whether its nodes sync with the coordinator.
	syncs() bool
	// early reports whether its nodes sync early when the module asks and
	// hold SyncRetry requests for a sync (edgelimit's edge hosts).
	early() bool
	// decide decides a request of isolate iso at now. held reports that
	// the request waits for a sync and is recorded later.
	decide(e *engine, now int64, iso int, gid int32, lim int, cost int64) (allowed bool, added int64, held bool, err error)
}

// strategyFor returns the strategy named name (see AllStrategies).
func strategyFor(name string) (strategy, error) {
	if base, ok := strings.CutSuffix(name, FeedbackSuffix); ok {
		st, err := strategyFor(base)
		if ed, isEdge := st.(edge); err == nil && isEdge && !ed.byLocation {
			ed.feedback = true
			return ed, nil
		}
		return nil, fmt.Errorf("sim: unknown strategy %q (feedback applies to approximate, strict and auto)", name)
	}
	switch name {
	case LocalOnly:
		return localOnly{}, nil
	case Central:
		return central{}, nil
	case Location:
		return edge{m: wire.Approximate, byLocation: true}, nil
	case Approximate:
		return edge{m: wire.Approximate, holds: true}, nil
	case Strict:
		return edge{m: wire.Strict, holds: true}, nil
	case Auto:
		return edge{m: wire.Auto, holds: true}, nil
	}
	return nil, fmt.Errorf("sim: unknown strategy %q", name)
}

// localOnly: every isolate decides alone.
type localOnly struct{}

func (localOnly) mode() string         { return wire.Approximate }
func (localOnly) nodes(iso, _ int) int { return iso }
func (localOnly) syncs() bool          { return false }
func (localOnly) early() bool          { return false }
func (localOnly) decide(e *engine, now int64, iso int, gid int32, lim int, cost int64) (bool, int64, bool, error) {
	d, err := e.nodes[iso].iso.Decide(e.ctx, lim, e.keys[gid].name, cost, now)
	if err != nil {
		return false, 0, false, fmt.Errorf("sim: decide: %w", err)
	}
	return d.Allowed, 0, false, nil
}

// central: one counter, a round trip per request (retried up to
// centralAttempts times); when it cannot be reached the fail policy
// decides.
type central struct{}

// centralAttempts is how many times a central request is sent.
const centralAttempts = 4

func (central) mode() string       { return wire.Approximate }
func (central) nodes(_, _ int) int { return 1 }
func (central) syncs() bool        { return false }
func (central) early() bool        { return false }
func (central) decide(e *engine, now int64, iso int, gid int32, lim int, cost int64) (bool, int64, bool, error) {
	k := &e.keys[gid]
	var added int64
	for attempt := 0; attempt < centralAttempts; attempt++ {
		e.res.SyncRequests++
		e.res.SyncBytes += k.batchBytes
		took, ok := e.net.roundTrip(iso, iso%e.locations, now+added)
		added += took
		if !ok {
			e.res.SyncFailures++
			continue
		}
		e.res.SyncBytes += k.replyBytes
		d, err := e.nodes[0].iso.Decide(e.ctx, lim, k.name, cost, now)
		if err != nil {
			return false, 0, false, fmt.Errorf("sim: central decide: %w", err)
		}
		if d.Allowed {
			e.res.CoordWrites++
		}
		return d.Allowed, added, false, nil
	}
	// Unreachable: the fail policy decides (open admits unchecked).
	key := gid*int32(e.isolates) + int32(iso)
	v := failpolicy.Apply(e.policies[lim], true, e.nodes[0].share, key, cost, e.quota(gid), now)
	return v == failpolicy.Pass, added, false, nil
}

// edge: isolates (or one counter per location) that decide locally and
// sync with the coordinator.
type edge struct {
	m          string
	byLocation bool // one node per location (the per-location counter)
	holds      bool // hold SyncRetry requests and sync early (edgelimit)
	feedback   bool // observe the upstream's answers (Upstream)
}

func (s edge) mode() string { return s.m }
func (s edge) nodes(iso, loc int) int {
	if s.byLocation {
		return loc
	}
	return iso
}
func (edge) syncs() bool   { return true }
func (s edge) early() bool { return s.holds }
func (s edge) decide(e *engine, now int64, iso int, gid int32, lim int, cost int64) (bool, int64, bool, error) {
	node := iso
	if s.byLocation {
		node = iso % e.locations
	}
	nd := e.nodes[node]
	// On a stale view the limiter's fail policy applies first, as in the
	// edge host; a request that passes it is decided by the module.
	stale := nd.sched.Stale(now)
	if stale && failpolicy.Apply(e.policies[lim], true, nd.share, gid, cost, e.quota(gid), now) == failpolicy.Deny {
		return false, 0, false, nil
	}
	d, err := nd.iso.Decide(e.ctx, lim, e.keys[gid].name, cost, now)
	if err != nil {
		return false, 0, false, fmt.Errorf("sim: decide: %w", err)
	}
	if d.Allowed {
		e.noteRemaining(gid, cost, d.Remaining, now)
	}
	if stale && !s.byLocation {
		// As the edge host's decideAlone: on a stale view the fail
		// policy admits (open: within the whole limit per isolate;
		// local-share: what Apply took from the share) a request of a
		// leased or read-through limiter the module denied only for
		// want of a lease or a view, and the module records it, so the
		// coordinator counts it once it is back. Before, the simulator
		// denied it, and showed open and local-share on strict and auto
		// limiters as closed through a partition.
		if l := &e.cfg.Limiters[lim]; l.Leased() || l.ReadThrough {
			q := e.quota(gid)
			if failpolicy.Leased(e.policies[lim], nd.share, gid, cost, q, now, d.Allowed, d.SyncRetry) && !d.Allowed {
				if err := nd.iso.Admit(e.ctx, lim, e.keys[gid].name, cost, now); err != nil {
					return false, 0, false, fmt.Errorf("sim: admit alone: %w", err)
				}
				return true, 0, false, nil
			}
		}
	}
	if d.SyncRetry && s.holds && !stale {
		if r, ok := e.retry.Begin(now); ok {
			r.Decided(d.Reset, now)
			nd.waiting = append(nd.waiting, waiter{t: now, cost: cost, gid: gid, lim: lim, r: r})
			e.heap.push(event{t: r.Deadline(), node: int32(nd.index), gen: nd.gen, kind: evDeadline})
			// The batch on its way, if any, was cut before this request
			// asked: amend it, or cut the next (syncloop.NextAsk).
			return false, 0, true, e.ask(nd, now)
		}
	}
	if d.SyncWanted && s.holds {
		return d.Allowed, 0, false, e.want(nd, now)
	}
	return d.Allowed, 0, false, nil
}
