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
// nor another failure follows: 10 s.
const BackgroundErrorHold = 10 * time.Second

var errBackground = errors.New("pebblestore: background error (flush or compaction failing)")

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
		slog.Error("pebblestore: background error (unhealthy until a flush or compaction succeeds)", "err", err)
	}
	h.err, h.at = err, h.now()
	h.count++
}

// ok clears the error: a background job succeeded.
func (h *bgHealth) ok() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		slog.Info("pebblestore: background work succeeds again (healthy)")
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
