package coordinator

import (
	"fmt"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
)

// Store health. Pebble writes memtables to tables (flushes) and compacts
// them in the background; their failures (a full disk: "no space left on
// device") do not fail the commits at first, which go to the WAL, until the
// memtables fill up and writes stall. The coordinator must not look
// healthy meanwhile, so a Store may report background failures
// (HealthReporter): while it does, GET /healthz answers 503, Sync answers
// 503 (ErrUnavailable, nothing applied, retry with the same Seq) and the
// gauge edgelimit_coordinator_store_healthy is 0. pebblestore.Store reports
// a background error until a flush or compaction succeeds again, or until
// pebblestore.BackgroundErrorHold passed without a new one (the store
// retries a failed flush with backoff up to pebblestore.FlushBackoffMax, so
// a persisting failure keeps reporting, at about one failed flush per
// second). A failed commit is reported the same way until a commit
// succeeds. The gauge edgelimit_coordinator_store_failing_seconds says for
// how long the store has been failing.

// HealthReporter is a Store that reports failures of its background work.
type HealthReporter interface {
	// Health returns the store's current background failure, or nil.
	Health() error
	// BackgroundErrors returns how many background failures were reported
	// since the store was opened.
	BackgroundErrors() int64
	// FailingSince returns when the current run of background failures
	// began, or the zero time while Health reports none.
	FailingSince() time.Time
}

// storeErr returns ErrUnavailable wrapping the store's background failure,
// or nil when the store reports none.
func (c *Coordinator) storeErr() error {
	hr, ok := c.store.(HealthReporter)
	if !ok {
		return nil
	}
	if err := hr.Health(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// setStoreDown records the outcome of a commit: down after a failure,
// up after a success; storeDownAt keeps when the store went down.
func (c *Coordinator) setStoreDown(down bool) {
	if !down {
		c.storeDown.Store(false)
		return
	}
	if c.storeDown.CompareAndSwap(false, true) {
		c.storeDownAt.Store(time.Now().UnixNano())
	}
}

// failingFor returns how long the store has been failing (failed commits
// or background failures), 0 while it works.
func (c *Coordinator) failingFor() time.Duration {
	var since time.Time
	if c.storeDown.Load() {
		since = time.Unix(0, c.storeDownAt.Load())
	}
	if hr, ok := c.store.(HealthReporter); ok {
		if s := hr.FailingSince(); !s.IsZero() && (since.IsZero() || s.Before(since)) {
			since = s
		}
	}
	if since.IsZero() {
		return 0
	}
	return time.Since(since)
}

// healthy reports whether the store works: the last commit succeeded and
// the store reports no background failure (GET /healthz); in shared mode,
// what the store's probe says (sharedHealthy).
func (c *Coordinator) healthy() error {
	if c.shared != nil {
		return c.sharedHealthy()
	}
	if c.storeDown.Load() {
		if err := c.storeErr(); err != nil {
			return err // the cause, when the store knows it (free space below the reserve)
		}
		return c.probeWrite()
	}
	return c.storeErr()
}

// healthKey is the storage key probeWrite writes: a prefix ('z') no scan
// of the merge visits.
var healthKey = []byte("z/health")

// probeEvery is how often probeWrite writes: a second.
const probeEvery = time.Second

// probeWrite answers the health of a store whose last commit failed by
// writing healthKey (at most every probeEvery; between, the last answer):
// a write that succeeds means the next commit will, and the store is up
// again. Only a commit with work cleared a failed one before, and a load
// balancer that routes syncs by /healthz sent none: 503 long after the
// disk had room again.
func (c *Coordinator) probeWrite() error {
	c.probeMu.Lock()
	defer c.probeMu.Unlock()
	if time.Since(c.probeAt) < probeEvery {
		return c.probeErr
	}
	c.probeAt = time.Now()
	err := c.store.Commit([]merge.Op{{Key: healthKey, Value: []byte(c.probeAt.UTC().Format(time.RFC3339Nano))}})
	if err != nil {
		c.probeErr = fmt.Errorf("%w: the last commit failed, and a write now: %w", ErrUnavailable, err)
		return c.probeErr
	}
	c.probeErr = nil
	c.setStoreDown(false)
	return nil
}
