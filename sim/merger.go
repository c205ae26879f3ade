package sim

import (
	"fmt"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// merger is the coordinator the simulator runs: the real merge code
// (merge.Merger) over Pebble on an in-memory filesystem, driven
// directly under virtual time. Batches are applied as the server applies
// them and group-committed every commitEvery batches, as the server
// group-commits concurrent requests; replies come from the same in-memory
// merge state either way. Only the server's goroutines and HTTP are left
// out, so a sync costs the merge and its share of a commit, not a
// goroutine hop. A failed commit fails the run.
type merger struct {
	m       *merge.Merger
	store   *pebblestore.Store
	applied int // batches applied since the last commit
}

// commitEvery is how many batches share one commit.
const commitEvery = 32

// newMerger returns the simulated coordinator of cfg over Pebble in
// memory, with the options opts (StrandBudget, MaxIsolatesPerKey; the
// rest the coordinator's defaults).
func newMerger(cfg wire.Config, opts merge.MergerOptions) (*merger, error) {
	store, err := pebblestore.Open(vfs.NewMem(), "")
	if err != nil {
		return nil, fmt.Errorf("sim: coordinator store: %w", err)
	}
	// The coordinator's defaults, reset notices included: what the
	// heartbeats of isolates that deny from cached denials cost is part
	// of the figures.
	m, err := merge.NewMerger(cfg, store, opts)
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
	if c.applied++; c.applied >= commitEvery {
		c.applied = 0
		if err := c.m.Commit(now); err != nil {
			return nil, fmt.Errorf("sim: coordinator commit: %w", err)
		}
	}
	return rp, nil
}

// Close releases the store.
func (c *merger) Close() error { return c.store.Close() }
