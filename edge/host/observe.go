package host

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// ObserveRequest is the body of POST /v1/observe: what the upstream
// answered to a request of (Limiter, Key). Status 0 means no answer came
// (a transport failure). Headers are the answer's headers; only the
// rate-limit ones are read (Retry-After, RateLimit, RateLimit-Policy,
// X-RateLimit-*), the rest are ignored.
type ObserveRequest struct {
	Limiter string            `json:"limiter"`
	Key     string            `json:"key"`
	Status  int64             `json:"status"`
	Headers map[string]string `json:"headers,omitempty"`
}

// ObserveResponse is the answer of POST /v1/observe: the key's upstream
// state after the observation.
type ObserveResponse struct {
	PausedNS int64  `json:"paused_ns"` // the key is paused for this long (0: not paused)
	Circuit  string `json:"circuit"`   // "closed", "open" or "half-open"
	Limit    int64  `json:"limit"`     // the key's limit now
	Ignored  string `json:"ignored,omitempty"`
}

// circuitNames names wire.CircuitClosed, CircuitOpen and CircuitHalfOpen.
var circuitNames = [...]string{"closed", "open", "half-open"}

// Observe gives what the upstream answered to every isolate of the host
// at now (ns): each applies it at once (a pause, the circuit, an announced
// limit), and one of them, chosen by the key, reports it to the
// coordinator so the fleet learns it with its next sync (kicked at once
// when the answer changes something).
func (h *Host) Observe(ctx context.Context, q ObserveRequest, now int64) (wire.Observed, error) {
	names := make([]string, 0, len(q.Headers))
	for n := range q.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	hs := make([][2]string, 0, len(names))
	for _, n := range names {
		hs = append(hs, [2]string{n, q.Headers[n]})
	}
	reporter := int(fnv32(q.Limiter, q.Key) % uint32(len(h.slots)))
	var out wire.Observed
	var trapped error
	for i, s := range h.slots {
		s.mu.Lock()
		o, err := s.iso.Observe(ctx, q.Limiter, q.Key, q.Status, hs, i != reporter, now)
		s.mu.Unlock()
		if errors.Is(err, isolate.ErrTrap) {
			// That isolate restarted; the others still hear of the
			// upstream's answer (before, those after it never did, and
			// the trap went unlogged).
			s.log.Error("host: the isolate trapped and restarted; what it had not synced is lost", "err", err)
			trapped = cmp.Or(trapped, err)
			continue
		}
		if err != nil {
			return out, fmt.Errorf("host: %w", err)
		}
		if i == reporter {
			out = o
			if o.Sync && s.loop != nil {
				s.loop.Kick()
			}
		}
	}
	if trapped != nil {
		return out, fmt.Errorf("host: %w", trapped)
	}
	return out, nil
}

func fnv32(a, b string) uint32 {
	h := uint32(2166136261)
	for _, s := range [2]string{a, b} {
		for i := 0; i < len(s); i++ {
			h ^= uint32(s[i])
			h *= 16777619
		}
		h ^= 0xff
		h *= 16777619
	}
	return h
}

func (h *Host) handleObserve(w http.ResponseWriter, r *http.Request) {
	if !capBody(w, r, h.opts.Server.MaxBodyBytes) {
		return
	}
	var q ObserveRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(&q)
	if err == nil {
		// One document: anything but white space after it is refused,
		// not ignored.
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("a second JSON value after the request (one JSON object per request)")
			var mbe *http.MaxBytesError
			if errors.As(terr, &mbe) {
				err = terr
			}
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			problem(w, http.StatusRequestEntityTooLarge, "body", err.Error())
			return
		}
		problem(w, http.StatusBadRequest, "body", "host: observe: "+err.Error())
		return
	}
	switch {
	case h.slots[0].iso.LimiterIndex(q.Limiter) < 0:
		problem(w, http.StatusBadRequest, "limiter", fmt.Sprintf("host: unknown limiter %q", q.Limiter))
		return
	case q.Key == "" || len(q.Key) > wire.MaxKeyLen:
		problem(w, http.StatusBadRequest, "key", fmt.Sprintf("host: key must be 1 to %d bytes", wire.MaxKeyLen))
		return
	case q.Status < 0 || q.Status > 999:
		problem(w, http.StatusBadRequest, "status", "host: status must be 0 (no answer) or an HTTP status")
		return
	}
	q.Headers = rateHeaders(q.Headers)
	switch {
	case len(q.Headers) > wire.MaxHeaders:
		problem(w, http.StatusBadRequest, "headers", fmt.Sprintf("host: at most %d rate-limit headers", wire.MaxHeaders))
		return
	}
	for n, v := range q.Headers {
		if len(n) > wire.MaxHeaderLen || len(v) > wire.MaxHeaderLen {
			problem(w, http.StatusBadRequest, "headers", fmt.Sprintf("host: rate-limit header names and values are at most %d bytes", wire.MaxHeaderLen))
			return
		}
	}
	o, err := h.Observe(r.Context(), q, h.opts.Clock.Now())
	if err != nil {
		problem(w, http.StatusInternalServerError, "observe", err.Error())
		return
	}
	resp := ObserveResponse{PausedNS: o.Paused, Limit: o.Limit, Ignored: o.Ignored, Circuit: "closed"}
	if o.Circuit >= 0 && int(o.Circuit) < len(circuitNames) {
		resp.Circuit = circuitNames[o.Circuit]
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

// rateHeaders returns the headers of h the module reads (Retry-After and
// the RateLimit, X-RateLimit and X-Rate-Limit families, any case), as the
// JavaScript package's observe() keeps them: an upstream's answer carries
// others (a long Content-Security-Policy, tracing headers), and the
// bounds on headers refused the whole 429 for them, nothing paused.
func rateHeaders(h map[string]string) map[string]string {
	var out map[string]string
	for n, v := range h {
		l := strings.ToLower(n)
		if l == "retry-after" || strings.HasPrefix(l, "ratelimit") || strings.HasPrefix(l, "x-ratelimit") || strings.HasPrefix(l, "x-rate-limit") {
			if out == nil {
				out = make(map[string]string, len(h))
			}
			out[n] = v
		}
	}
	return out
}
