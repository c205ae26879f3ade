package host

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Health is the body of GET /healthz.
type Health struct {
	// Status is "ok" (answered 200) or, answered 503: "stale" when an
	// isolate's view is stale (its syncs fail and its last good one is
	// older than StaleAfterMS: the fail policies apply), "failing" when an
	// isolate's last sync attempt failed, "unreachable" when no isolate
	// has heard from the coordinator within StaleAfterMS (it never synced,
	// or all were idle) and a probe of it failed just now.
	Status string `json:"status"`
	// Coordinator is the coordinator's URL (or the comma-separated list
	// of them); empty when the host runs alone.
	Coordinator string `json:"coordinator"`
	// CoordinatorInUse is the URL of the coordinator the syncs go to, or
	// the comma-separated URLs, in the order of Coordinator's list, when
	// the isolates sync to several (each prefers one by its id); empty
	// when the host runs alone.
	CoordinatorInUse string `json:"coordinator_in_use"`
	// CoordinatorFailovers counts the times the syncs moved on to the next
	// coordinator of the list (summed over the isolates).
	CoordinatorFailovers int64 `json:"coordinator_failovers"`
	// StaleAfterMS is the stale bound, ms.
	StaleAfterMS int64 `json:"stale_after_ms"`
	// SyncErrors counts failed sync attempts since the start.
	SyncErrors int64 `json:"sync_errors"`
	// CoordinatorAgeMS is the time since the coordinator last answered
	// (an applied reply of any isolate, or a probe), ms; -1 when it never
	// did or the host runs alone.
	CoordinatorAgeMS int64 `json:"coordinator_age_ms"`
	// ClockOffsetMS is what the host adds to its own clock to run on the
	// coordinator's (learned from the coordinator's replies, see
	// clock.Offset), ms; 0 when the clocks agree within the tolerance, the
	// host runs alone or keeps its own clock (Options.OwnClock).
	ClockOffsetMS int64 `json:"clock_offset_ms"`
	// ProbeError is the error of the probe made for this answer, if any.
	ProbeError string `json:"probe_error,omitempty"`
	// Isolates holds one entry per isolate, in order.
	Isolates []IsolateHealth `json:"isolates"`
}

// IsolateHealth is one isolate in Health.
type IsolateHealth struct {
	// ID is the id the isolate syncs under ("<prefix>-N", "/rK" after K restarts).
	ID string `json:"id"`
	// LastSyncAgeMS is the time since the isolate's last applied reply
	// from the coordinator (a real round trip), ms; -1 when it never had
	// one, or without a coordinator.
	LastSyncAgeMS int64 `json:"last_sync_age_ms"`
	// Coordinator is the URL of the coordinator the isolate syncs to;
	// empty when the host runs alone.
	Coordinator string `json:"coordinator,omitempty"`
	// Failures counts the consecutive failed sync attempts.
	Failures int64 `json:"failures"`
	// Stale reports that the fail policies apply to this isolate.
	Stale bool `json:"stale"`
	// Restarts counts restarts after a trap.
	Restarts int `json:"restarts"`
}

// Health reports the state of the isolates' syncs at now (ns), without
// I/O: Status is "ok", "stale" or "failing" (see Health.Status); the
// handler of /healthz adds the probe of an idle host (CheckHealth).
func (h *Host) Health(now int64) Health {
	hl := Health{Status: "ok", Coordinator: h.opts.Coordinator, StaleAfterMS: h.opts.Sync.StaleAfter.Milliseconds(),
		SyncErrors: h.errs.Load(), CoordinatorAgeMS: -1}
	if h.opts.Coordinator != "" {
		hl.CoordinatorInUse, hl.CoordinatorFailovers = h.coordinatorsInUse()
	}
	if h.offset != nil {
		hl.ClockOffsetMS = time.Duration(h.offset.Offset()).Milliseconds()
	}
	heard := h.probedAt.Load()
	for _, s := range h.slots {
		s.mu.Lock()
		ih := IsolateHealth{ID: s.iso.ID(), LastSyncAgeMS: -1, Restarts: s.iso.Restarts()}
		s.mu.Unlock()
		if s.tr != nil {
			ih.Coordinator = s.tr.Current()
		}
		if s.loop != nil {
			if at := s.lastReply.Load(); at != 0 {
				ih.LastSyncAgeMS = time.Duration(s.baseTime(now) - at).Milliseconds()
				// On now's clock, as probedAt is (the reply's time is on
				// the slot's base clock: mixed, an offset of 2 s read as
				// a coordinator heard 2 s before, or 2 s ahead).
				heard = max(heard, at+now-s.baseTime(now))
			}
			ih.Failures = s.failures.Load()
			ih.Stale = s.stale(now, int64(h.opts.Sync.StaleAfter))
		}
		switch {
		case ih.Stale:
			hl.Status = "stale"
		case ih.Failures > 0 && hl.Status == "ok":
			hl.Status = "failing"
		}
		hl.Isolates = append(hl.Isolates, ih)
	}
	if heard != 0 {
		hl.CoordinatorAgeMS = time.Duration(now - heard).Milliseconds()
	}
	return hl
}

// CheckHealth is Health at the host clock's now, and, when the syncs do
// not fail but no isolate has heard from the coordinator within the stale
// bound (the host never synced, or was idle), a probe of the coordinator
// (syncloop.HTTPTransport.Probe, bounded by hungAfter): "unreachable"
// when it fails. Concurrent calls share one probe, failed or not. While the syncs fail it
// kicks every isolate's loop, which starts an attempt past the backoff
// once per probe interval, as a request does: the next check sees them
// recovered once the coordinator answers.
func (h *Host) CheckHealth(ctx context.Context) Health {
	hl := h.Health(h.opts.Clock.Now())
	if hl.Status != "ok" && h.opts.Coordinator != "" {
		// A health check probes, as a request does (syncloop's
		// Scheduler.Probe: past the backoff, once per probe interval):
		// an orchestrator that drains an edge whose check fails sends
		// it no request, and it stayed stale until its backoff ran out.
		now := h.opts.Clock.Now()
		for _, s := range h.slots {
			if s.loop != nil {
				h.probeSlot(s, now)
			}
		}
	}
	if hl.Status != "ok" || h.opts.Coordinator == "" || h.heardWithin(hl) {
		return hl
	}
	began := h.opts.Clock.Now()
	h.probeMu.Lock()
	defer h.probeMu.Unlock()
	if hl = h.Health(h.opts.Clock.Now()); hl.Status != "ok" || h.heardWithin(hl) {
		return hl // another call probed meanwhile
	}
	if f := h.probeErr.Load(); f != nil && f.at >= began {
		// Another call's probe failed while this one waited: its answer,
		// not a probe more (six checks at once against a frozen
		// coordinator answered after 1, 2, ... 6 s, one probe each).
		hl.Status, hl.ProbeError = "unreachable", f.err
		return hl
	}
	// Bounded as an attempt is before it counts as hung (hungAfter: 1 s
	// by default), not by the sync timeout: against a coordinator that
	// hangs (a black hole, SIGSTOP) the check answered after 5 s, past
	// the health-check timeout of most load balancers.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(h.hungAfter()))
	defer cancel()
	if err := h.probe.Probe(ctx); err != nil {
		hl.Status, hl.ProbeError = "unreachable", err.Error()
		h.probeErr.Store(&probeFailure{at: h.opts.Clock.Now(), err: hl.ProbeError})
		return hl
	}
	h.probedAt.Store(h.opts.Clock.Now())
	return h.Health(h.opts.Clock.Now())
}

// heardWithin reports whether hl says the coordinator answered within the
// stale bound.
func (h *Host) heardWithin(hl Health) bool {
	return hl.CoordinatorAgeMS >= 0 && hl.CoordinatorAgeMS <= hl.StaleAfterMS
}

// handleHealth answers GET /healthz: 200 with Health, or 503 when the
// status is not "ok" (CheckHealth).
func (h *Host) handleHealth(w http.ResponseWriter, r *http.Request) {
	hl := h.CheckHealth(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if hl.Status != "ok" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(hl)
}

// probeFailure is a failed probe of CheckHealth: when it ended (ns, host
// clock) and its error.
type probeFailure struct {
	at  int64
	err string
}
