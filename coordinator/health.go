package coordinator

import "fmt"

// Store health. Pebble writes memtables to tables (flushes) and compacts
// them in the background; their failures (a full disk: "no space left on
// device") do not fail the commits at first, which go to the WAL, until the
// memtables fill up and writes stall. The coordinator must not look
// healthy meanwhile, so a Store may report background failures
// (HealthReporter): while it does, GET /healthz answers 503, Sync answers
// 503 (ErrUnavailable, nothing applied, retry with the same Seq) and the
// gauge edgelimit_coordinator_store_healthy is 0. pebblestore.Store reports
// a background error until a flush or compaction succeeds again, or until
// pebblestore.BackgroundErrorHold passed without a new one (Pebble retries a failed
// flush at once, so a persisting failure keeps reporting). A failed commit
// is reported the same way until a commit succeeds.

// HealthReporter is a Store that reports failures of its background work.
type HealthReporter interface {
	// Health returns the store's current background failure, or nil.
	Health() error
	// BackgroundErrors returns how many background failures were reported
	// since the store was opened.
	BackgroundErrors() int64
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

// healthy reports whether the store works: the last commit succeeded and
// the store reports no background failure (GET /healthz); in shared mode,
// what the store's probe says (sharedHealthy).
func (c *Coordinator) healthy() error {
	if c.shared != nil {
		return c.sharedHealthy()
	}
	if c.storeDown.Load() {
		return fmt.Errorf("%w: the last commit failed", ErrUnavailable)
	}
	return c.storeErr()
}
