package coordinator

import (
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// observers tells every one of its merge.Observers of each applied batch,
// in order (the dashboard, the per-limiter metrics, the history), with the
// cost each windowed entry reports bounded (boundedObserved).
type observers struct {
	list   []merge.Observer
	limits *merge.Limits // the limits in force
	cfg    wire.Config   // the configuration at start
}

// Applied implements merge.Observer.
func (ob *observers) Applied(b *wire.Batch, rp *wire.Reply, now int64) {
	b = ob.boundedObserved(b)
	for _, o := range ob.list {
		o.Applied(b, rp, now)
	}
}

// boundedObserved returns b, or, when an entry of a windowed limiter
// reports more admitted cost than its key's limit (the larger of the one
// in force and the configuration's at start), a copy with that entry's Delta
// at the limit: one isolate admits at most a window's limit of a key in a
// window (a lease is within it; an approximate estimate and a fail policy
// admit within it), so only a hostile or broken client reports more. The
// observers' totals (admitted_total, the dashboard's, the history) are
// sums over every batch, and one batch of 8,192 entries reporting 2^50
// each pinned them at the largest int64 for as long as they are kept.
// The counts applied to the keys are the store's: not changed here. Not
// bounded: bucket limiters' entries (an entry covers the isolate's cost
// since its last batch, however long ago) and denied cost (an isolate may
// refuse any amount): a hostile batch can still pin those totals.
func (ob *observers) boundedObserved(b *wire.Batch) *wire.Batch {
	var out *wire.Batch
	var g *merge.LimitsGen
	if ob.limits != nil {
		g = ob.limits.Load()
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		capped := ob.entryCap(g, e)
		if capped < 0 || e.Delta <= capped {
			continue
		}
		if out == nil {
			cp := *b
			cp.Entries = append([]wire.Delta(nil), b.Entries...)
			out = &cp
		}
		// Demand less the same: Demand - Delta (a module that does not
		// report its denials) stays what the batch says was refused.
		out.Entries[i].Delta, out.Entries[i].Demand = capped, e.Demand-(e.Delta-capped)
	}
	if out == nil {
		return b
	}
	return out
}

// entryCap returns the most admitted cost entry e can honestly report: its
// key's limit for a windowed limiter, the larger of the one in force (g;
// nil: none) and the configuration's at start; -1 (no bound) for buckets and
// limiters it does not know.
func (ob *observers) entryCap(g *merge.LimitsGen, e *wire.Delta) int64 {
	l := ob.cfg.Limiter(e.Limiter)
	if l == nil || l.IsBucket() {
		return -1
	}
	c := l.LimitFor(e.Key)
	if g != nil {
		if gl := g.Config.Limiter(e.Limiter); gl != nil {
			c = max(c, gl.LimitFor(e.Key))
		}
	}
	return c
}
