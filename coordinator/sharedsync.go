package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// syncShared is Coordinator.sync in shared mode: the batch joins the next
// group of the shared merger's loop.
func (c *Coordinator) syncShared(ctx context.Context, b *wire.Batch) (*request, error) {
	c.closeMu.RLock()
	if c.closed {
		c.closeMu.RUnlock()
		return nil, ErrClosed
	}
	c.inflight.Add(1)
	c.closeMu.RUnlock()
	defer c.inflight.Done()
	start := time.Now()
	rp, stale, err := c.shared.Sync(ctx, b, scopeOf(ctx))
	if errors.Is(err, ErrUnavailable) {
		c.setStoreDown(true)
	}
	if err != nil {
		return nil, err
	}
	c.setStoreDown(false)
	c.met.observeCommit(time.Since(start), 1)
	c.dash.Committed(time.Since(start))
	return &request{batch: b, reply: rp, stale: stale}, nil
}

// Prober is a SharedStore that can say whether it serves writes now
// (redisstore.Store.Probe: every master answers, WAIT can be met).
type Prober interface {
	Probe(ctx context.Context) error
}

// sharedProbeTimeout bounds one health probe of a shared store: 1 s.
const sharedProbeTimeout = time.Second

// sharedHealthy is healthy in shared mode: a store that probes itself
// (Prober) is asked, so GET /healthz answers 200 as soon as the store
// serves again rather than after the next write; otherwise, whether the
// last group failed.
func (c *Coordinator) sharedHealthy() error {
	p, ok := c.store.(Prober)
	if !ok {
		if c.storeDown.Load() {
			return fmt.Errorf("%w: the last commit failed", ErrUnavailable)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedProbeTimeout)
	defer cancel()
	if err := p.Probe(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// mergeStats returns the merge counters (of the Merger, or in shared mode
// of every batch this coordinator merged).
func (c *Coordinator) mergeStats() merge.MergeStats {
	if c.shared != nil {
		return c.shared.Stats()
	}
	var s merge.MergeStats
	c.withMerger(func(m *merge.Merger) { s = m.Stats() })
	return s
}
