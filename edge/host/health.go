package host

import (
	"encoding/json"
	"net/http"
	"time"
)

// Health is the body of GET /healthz.
type Health struct {
	// Status is "ok", or "stale" when an isolate's view is stale (its
	// syncs have failed, or taken, longer than StaleAfterMS): the answer
	// is then 503.
	Status string `json:"status"`
	// Coordinator is the coordinator's URL; empty when the host runs alone.
	Coordinator string `json:"coordinator"`
	// StaleAfterMS is the stale bound, ms.
	StaleAfterMS int64 `json:"stale_after_ms"`
	// SyncErrors counts failed sync attempts since the start.
	SyncErrors int64 `json:"sync_errors"`
	// Isolates holds one entry per isolate, in order.
	Isolates []IsolateHealth `json:"isolates"`
}

// IsolateHealth is one isolate in Health.
type IsolateHealth struct {
	// ID is the id the isolate syncs under ("<prefix>-N", "/rK" after K restarts).
	ID string `json:"id"`
	// LastSyncAgeMS is the time since the isolate's last good sync (or
	// since it last had nothing to sync), ms; -1 without a coordinator.
	LastSyncAgeMS int64 `json:"last_sync_age_ms"`
	// Failures counts the consecutive failed sync attempts.
	Failures int64 `json:"failures"`
	// Stale reports that the fail policies apply to this isolate.
	Stale bool `json:"stale"`
	// Restarts counts restarts after a trap.
	Restarts int `json:"restarts"`
}

// Health reports the state of the isolates' syncs at now (ns).
func (h *Host) Health(now int64) Health {
	hl := Health{Status: "ok", Coordinator: h.opts.Coordinator, StaleAfterMS: h.opts.Sync.StaleAfter.Milliseconds(),
		SyncErrors: h.errs.Load()}
	for _, s := range h.slots {
		s.mu.Lock()
		ih := IsolateHealth{ID: s.iso.ID(), LastSyncAgeMS: -1, Restarts: s.iso.Restarts()}
		s.mu.Unlock()
		if s.loop != nil {
			ih.LastSyncAgeMS = time.Duration(now - s.lastOK.Load()).Milliseconds()
			ih.Failures = s.failures.Load()
			ih.Stale = s.stale(now, int64(h.opts.Sync.StaleAfter))
		}
		if ih.Stale {
			hl.Status = "stale"
		}
		hl.Isolates = append(hl.Isolates, ih)
	}
	return hl
}

// handleHealth answers GET /healthz: 200 with Health, or 503 when an
// isolate's view is stale.
func (h *Host) handleHealth(w http.ResponseWriter, r *http.Request) {
	hl := h.Health(h.opts.Clock.Now())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if hl.Status != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(hl)
}
