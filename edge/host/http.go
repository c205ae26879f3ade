package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Handler returns the host's HTTP API:
//
//	GET|POST /v1/decide?limiter=NAME&key=KEY[&cost=N]   (limiter/key repeated: checked together)
//	POST /v1/observe   (JSON ObserveRequest: what the upstream answered; see observe.go)
//	GET /healthz   (JSON Health: 200, or 503 once an isolate's view is stale)
//	GET /metrics   (Prometheus text; see metrics)
//
// A decision answers 200 when allowed and 429 when denied, with a JSON body
// (allowed, limit, remaining, reset_ns, retry_after_ns, limiter) and the
// headers RateLimit-Policy ("NAME";q=LIMIT;w=PERIOD_SECONDS), RateLimit
// ("NAME";r=REMAINING;t=SECONDS_TO_RESET) and, when denied, Retry-After
// (seconds). A decision taken on a stale view carries EdgeLimit-Fail-Policy
// (the binding limiter's policy: open, closed or local-share). Bad input
// answers 400 with a problem+json body, a body over
// ServerOptions.MaxBodyBytes 413, a browser's request from a page of
// another site 403 (crossorigin.go).
func (h *Host) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/decide", h.handleDecide)
	mux.HandleFunc("/v1/wait", h.handleWait)            // see wait.go
	mux.HandleFunc("POST /v1/observe", h.handleObserve) // see observe.go
	mux.HandleFunc("GET /healthz", h.handleHealth)
	mux.Handle("GET /metrics", h.met.handler())
	return sameOrigin(mux) // crossorigin.go
}

type decisionJSON struct {
	Allowed    bool   `json:"allowed"`
	Limit      int64  `json:"limit"`
	Remaining  int64  `json:"remaining"`
	Reset      int64  `json:"reset_ns"`
	RetryAfter int64  `json:"retry_after_ns"`
	Limiter    string `json:"limiter"`
}

// readChecks reads the checks of a GET or POST decision request (body
// capped), or answers the problem and returns ok false.
func (h *Host) readChecks(w http.ResponseWriter, r *http.Request) (checks []isolate.Check, ok bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		problem(w, http.StatusMethodNotAllowed, "method", "use GET or POST")
		return nil, false
	}
	if !capBody(w, r, h.opts.Server.MaxBodyBytes) {
		return nil, false
	}
	checks, err := h.parseChecks(r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			problem(w, http.StatusRequestEntityTooLarge, "body", err.Error())
			return nil, false
		}
		problem(w, http.StatusBadRequest, "query", err.Error())
		return nil, false
	}
	return checks, true
}

func (h *Host) handleDecide(w http.ResponseWriter, r *http.Request) {
	checks, ok := h.readChecks(w, r)
	if !ok {
		return
	}
	var now int64 // the time of the decision (the last one, after a wait for a sync)
	d, err := h.Decide(r.Context(), checks, func() int64 { now = h.opts.Clock.Now(); return now })
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, core.ErrKeyTooLong) || errors.Is(err, core.ErrBadCost) || errors.Is(err, core.ErrEmptyKey) ||
			errors.Is(err, core.ErrUnknownLimiter) || errors.Is(err, core.ErrTooManyChecks) {
			status = http.StatusBadRequest
		}
		problem(w, status, "decision", err.Error())
		return
	}
	lim := h.opts.Config.Limiters[d.Limiter]
	hd := w.Header()
	if d.Stale {
		hd.Set("EdgeLimit-Fail-Policy", d.Policy.String())
	}
	hd.Set("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", lim.Name, d.Limit, ceilSeconds(lim.Period)))
	hd.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", lim.Name, d.Remaining, ceilSeconds(max(d.Reset-now, 0))))
	status := http.StatusOK
	if !d.Allowed {
		status = http.StatusTooManyRequests
		if d.RetryAfter >= 0 {
			hd.Set("Retry-After", strconv.FormatInt(max(ceilSeconds(d.RetryAfter), 1), 10))
		}
	}
	hd.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(decisionJSON{Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining,
		Reset: d.Reset, RetryAfter: d.RetryAfter, Limiter: lim.Name})
}

// parseChecks reads the limiter/key/cost parameters (query or form).
func (h *Host) parseChecks(r *http.Request) ([]isolate.Check, error) {
	if err := r.ParseForm(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	lims, keys, costs := r.Form["limiter"], r.Form["key"], r.Form["cost"]
	switch {
	case len(lims) == 0:
		return nil, fmt.Errorf("%w: a limiter parameter is required", ErrBadRequest)
	case len(keys) != len(lims):
		return nil, fmt.Errorf("%w: give one key per limiter (%d limiters, %d keys)", ErrBadRequest, len(lims), len(keys))
	case len(costs) > 1 && len(costs) != len(lims):
		return nil, fmt.Errorf("%w: give one cost, or one per limiter", ErrBadRequest)
	case len(lims) > wire.MaxChecks:
		return nil, fmt.Errorf("%w: at most %d limiters at once", ErrBadRequest, wire.MaxChecks)
	}
	checks := make([]isolate.Check, len(lims))
	for i, name := range lims {
		li := h.slots[0].iso.LimiterIndex(name)
		if li < 0 {
			return nil, fmt.Errorf("%w: unknown limiter %q", ErrBadRequest, name)
		}
		cost := int64(1)
		if len(costs) > 0 {
			c := costs[0]
			if len(costs) > 1 {
				c = costs[i]
			}
			v, err := strconv.ParseInt(strings.TrimSpace(c), 10, 64)
			if err != nil || v < 0 || v > wire.MaxCost {
				return nil, fmt.Errorf("%w: cost %q is not an integer between 0 and 2^40", ErrBadRequest, c)
			}
			cost = v
		}
		if keys[i] == "" || len(keys[i]) > wire.MaxKeyLen {
			return nil, fmt.Errorf("%w: key must be 1 to %d bytes", ErrBadRequest, wire.MaxKeyLen)
		}
		checks[i] = isolate.Check{Limiter: li, Key: keys[i], Cost: cost}
	}
	return checks, nil
}

func ceilSeconds(ns int64) int64 { return (ns + 1e9 - 1) / 1e9 }

func problem(w http.ResponseWriter, status int, field, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(status),
		"status": status, "detail": detail, "field": field})
}
