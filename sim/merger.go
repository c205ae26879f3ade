package sim

import (
	"fmt"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// merger is the coordinator the simulator runs: the real merge code
// (coordinator.Merger) over Pebble on an in-memory filesystem, driven
// directly under virtual time. Each batch is applied and committed before
// its reply, as the server does; only the server's goroutines and HTTP are
// left out, so a sync costs the merge and the commit, not a goroutine hop.
type merger struct {
	m     *coordinator.Merger
	store *coordinator.PebbleStore
}

func newMerger(cfg wire.Config) (*merger, error) {
	store, err := coordinator.OpenPebble("", true)
	if err != nil {
		return nil, fmt.Errorf("sim: coordinator store: %w", err)
	}
	m, err := coordinator.NewMerger(cfg, store, coordinator.MergerOptions{})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("sim: coordinator: %w", err)
	}
	return &merger{m: m, store: store}, nil
}

// sync applies b at now (ns) and commits it, returning the reply.
func (c *merger) sync(b *wire.Batch, now int64) (*wire.Reply, error) {
	rp, err := c.m.Apply(b, now)
	if err != nil {
		return nil, fmt.Errorf("sim: coordinator: %w", err)
	}
	if err := c.m.Commit(); err != nil {
		return nil, fmt.Errorf("sim: coordinator commit: %w", err)
	}
	return rp, nil
}

// Close releases the store.
func (c *merger) Close() error { return c.store.Close() }
