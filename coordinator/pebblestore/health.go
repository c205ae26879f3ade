package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// BackgroundErrorHold is how long a store background error (a failed flush
// or compaction) keeps the coordinator unhealthy when neither a success
// nor another failure follows: 10 s (well above FlushBackoffMax, so a
// failure that persists keeps reporting).
const BackgroundErrorHold = 10 * time.Second

var errBackground = errors.New("pebblestore: background error (flush or compaction failing)")

// bgHealth tracks the background errors of a store, and the backoff of the
// background work while they last (backoff.go).
type bgHealth struct {
	mu      sync.Mutex
	err     error     // the last background error, nil once cleared
	at      time.Time // when err was reported
	since   time.Time // the first failure of the current run (zero: none)
	run     int       // consecutive failures in the current run
	retryAt time.Time // the next attempt is held until then
	count   int64
	now     func() time.Time
	// noBackoff lets failed work be retried at once, as Pebble alone does
	// (BenchmarkDiskFull's comparison).
	noBackoff bool

	quit     chan struct{} // closed by stop: no more waits
	stopOnce sync.Once
}

func newBGHealth() *bgHealth {
	return &bgHealth{now: time.Now, quit: make(chan struct{})}
}

// fail records a background error and backs off the next attempt; the
// first of a run is logged (each retry's would flood the log).
func (h *bgHealth) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		slog.Error("pebblestore: background error (unhealthy until a flush or compaction succeeds; retried with backoff)", "err", err.Error())
	}
	now := h.now()
	if h.run == 0 {
		h.since = now
	}
	h.run++
	h.err, h.at = err, now
	h.retryAt = now.Add(backoffDelay(h.run))
	h.count++
}

// ok clears the error and ends the backoff: a background job succeeded.
func (h *bgHealth) ok() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		slog.Info("pebblestore: background work succeeds again (healthy)", "failures", h.run,
			"failing_for", h.now().Sub(h.since).Round(time.Millisecond))
	}
	h.err, h.run, h.since, h.retryAt = nil, 0, time.Time{}, time.Time{}
}

// wait holds the caller (a flush or compaction about to create a table)
// until the next attempt of the current run of failures is due, or stop.
func (h *bgHealth) wait() {
	h.mu.Lock()
	d := h.retryAt.Sub(h.now())
	h.mu.Unlock()
	if d > 0 && !h.noBackoff {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-h.quit:
			t.Stop()
		}
	}
}

// stop ends every wait, present and future (the store is closing).
func (h *bgHealth) stop() { h.stopOnce.Do(func() { close(h.quit) }) }

func (h *bgHealth) health() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	if h.err == nil || now.Sub(h.at) > BackgroundErrorHold {
		return nil
	}
	return fmt.Errorf("%w since %s (%d failures, next attempt in %s): %w", errBackground,
		h.since.UTC().Format(time.RFC3339), h.run, max(h.retryAt.Sub(now), 0).Round(time.Millisecond), h.err)
}

// failingSince returns when the current run of failures started, or the
// zero time when health reports none.
func (h *bgHealth) failingSince() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil || h.now().Sub(h.at) > BackgroundErrorHold {
		return time.Time{}
	}
	return h.since
}

func (h *bgHealth) errors() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}
