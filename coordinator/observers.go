package coordinator

import (
	"sync/atomic"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// observers tells every one of its merge.Observers of each applied batch,
// in order (the dashboard, the per-limiter metrics, the history), with the
// cost each windowed entry reports bounded (boundedObserved).
type observers struct {
	list   []merge.Observer
	limits *merge.Limits // the limits in force (nil: only cfg's)
	cfg    wire.Config   // the configuration at start
	caps   atomic.Pointer[entryCaps]
}

// entryCaps is, for one generation of the limits in force, the most
// admitted cost an entry of each windowed limiter can honestly report.
type entryCaps struct {
	gen int64
	max map[string]int64 // limiter name -> cap
}

// Applied implements merge.Observer.
func (ob *observers) Applied(b *wire.Batch, rp *wire.Reply, now int64) {
	b = ob.boundedObserved(b)
	for _, o := range ob.list {
		o.Applied(b, rp, now)
	}
}

// boundedObserved returns b, or, when an entry of a windowed limiter
// reports more admitted cost than any key of its limiter may admit in a
// window (the largest limit or override, in force or in the configuration
// at start), a copy with that entry's Delta at that cap: one isolate admits
// at most a window's limit of a key in a window (a lease is within it; an
// approximate estimate and a fail policy admit within it), so only a
// hostile or broken client reports more. The observers' totals
// (admitted_total, the dashboard's, the history) are sums over every
// batch, and one batch of 8,192 entries reporting 2^50 each pinned them
// at the largest int64 for as long as they are kept. The counts applied
// to the keys are the store's: not changed here. Not bounded: bucket
// limiters' entries (an entry covers the isolate's cost since its last
// batch, however long ago) and denied cost (an isolate may refuse any
// amount): a hostile batch can still pin those totals. One map lookup per
// entry; the caps are made again only when the limits in force change.
func (ob *observers) boundedObserved(b *wire.Batch) *wire.Batch {
	caps := ob.entryCaps()
	var out *wire.Batch
	for i := range b.Entries {
		e := &b.Entries[i]
		c, ok := caps.max[e.Limiter]
		if !ok || e.Delta <= c {
			continue
		}
		if out == nil {
			cp := *b
			cp.Entries = append([]wire.Delta(nil), b.Entries...)
			out = &cp
		}
		// Demand less the same: Demand - Delta (a module that does not
		// report its denials) stays what the batch says was refused.
		out.Entries[i].Delta, out.Entries[i].Demand = c, e.Demand-(e.Delta-c)
	}
	if out == nil {
		return b
	}
	return out
}

// entryCaps returns the caps for the limits in force, made when their
// generation changed.
func (ob *observers) entryCaps() *entryCaps {
	var g *merge.LimitsGen
	gen := int64(0)
	if ob.limits != nil {
		if g = ob.limits.Load(); g != nil {
			gen = g.Gen
		}
	}
	if c := ob.caps.Load(); c != nil && c.gen == gen {
		return c
	}
	c := &entryCaps{gen: gen, max: map[string]int64{}}
	add := func(cfg *wire.Config) {
		for i := range cfg.Limiters {
			l := &cfg.Limiters[i]
			if l.IsBucket() {
				continue
			}
			m := max(c.max[l.Name], l.Limit)
			for _, o := range l.Overrides {
				m = max(m, o.Limit)
			}
			c.max[l.Name] = m
		}
	}
	add(&ob.cfg)
	if g != nil {
		add(&g.Config)
	}
	ob.caps.Store(c)
	return c
}
