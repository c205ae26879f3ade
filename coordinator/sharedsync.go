package coordinator

import (
	"context"
	"errors"
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
