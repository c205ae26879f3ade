package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Store health. Pebble writes memtables to tables (flushes) and compacts
// them in the background; their failures (a full disk: "no space left on
// device") do not fail the commits at first, which go to the WAL, until the
// memtables fill up and writes stall. The coordinator must not look
// healthy meanwhile, so a Store may report background failures
// (HealthReporter): while it does, GET /healthz answers 503, Sync answers
// 503 (ErrUnavailable, nothing applied, retry with the same Seq) and the
// gauge edgelimit_coordinator_store_healthy is 0. PebbleStore reports a
// background error until a flush or compaction succeeds again, or until
// BackgroundErrorHold passed without a new one (Pebble retries a failed
// flush at once, so a persisting failure keeps reporting). A failed commit
// is reported the same way until a commit succeeds.

// BackgroundErrorHold is how long a store background error (a failed flush
// or compaction) keeps the coordinator unhealthy when neither a success
// nor another failure follows: 10 s.
const BackgroundErrorHold = 10 * time.Second

// HealthReporter is a Store that reports failures of its background work.
type HealthReporter interface {
	// Health returns the store's current background failure, or nil.
	Health() error
	// BackgroundErrors returns how many background failures were reported
	// since the store was opened.
	BackgroundErrors() int64
}

// bgHealth tracks the background errors of a store.
type bgHealth struct {
	mu    sync.Mutex
	err   error     // the last background error, nil once cleared
	at    time.Time // when err was reported
	count int64
	now   func() time.Time
}

// fail records a background error; the first of a run is logged (Pebble
// retries a failed flush at once: logging each would flood the log).
func (h *bgHealth) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		slog.Error("coordinator: pebble: background error (unhealthy until a flush or compaction succeeds)", "err", err)
	}
	h.err, h.at = err, h.now()
	h.count++
}

// ok clears the error: a background job succeeded.
func (h *bgHealth) ok() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		slog.Info("coordinator: pebble: background work succeeds again (healthy)")
	}
	h.err = nil
}

func (h *bgHealth) health() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil || h.now().Sub(h.at) > BackgroundErrorHold {
		return nil
	}
	return fmt.Errorf("%w: %w", errBackground, h.err)
}

func (h *bgHealth) errors() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

var errBackground = errors.New("coordinator: store background error (flush or compaction failing)")

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
// the store reports no background failure (GET /healthz).
func (c *Coordinator) healthy() error {
	if c.storeDown.Load() {
		return fmt.Errorf("%w: the last commit failed", ErrUnavailable)
	}
	return c.storeErr()
}
