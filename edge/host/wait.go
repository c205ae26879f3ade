package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/edgelimit/edgelimit/wasm/core"
)

// DefaultMaxWait is how long POST /v1/wait waits for a slot when the
// request names no max_wait.
const DefaultMaxWait = 5 * time.Second

// maxWaitCap returns the longest max_wait a request may ask for: one second
// less than the write timeout (the answer must still be written), or a
// minute when the server has no write timeout.
func (h *Host) maxWaitCap() time.Duration {
	switch wt := h.opts.Server.WriteTimeout; {
	case wt <= 0:
		return time.Minute
	case wt > 2*time.Second:
		return wt - time.Second
	default:
		return wt / 2
	}
}

// handleWait serves GET|POST /v1/wait: the parameters of /v1/decide plus
// max_wait (a Go duration, default DefaultMaxWait, at most one second less
// than the write timeout). It decides; while denied, it sleeps for the
// decision's retry-after and decides again, until allowed (200) or until
// the next attempt would come after max_wait (429, answered at once rather
// than at the deadline). A cost that can never pass answers 429 at once. The
// wait ends when the client goes away. The answer is that of /v1/decide,
// with EdgeLimit-Waited (ms spent waiting). Every attempt counts in the
// decision metrics.
func (h *Host) handleWait(w http.ResponseWriter, r *http.Request) {
	checks, ok := h.readChecks(w, r)
	if !ok {
		return
	}
	maxWait := DefaultMaxWait
	if s := r.Form.Get("max_wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d > h.maxWaitCap() {
			problem(w, http.StatusBadRequest, "max_wait", fmt.Sprintf("max_wait %q must be a duration between 0s and %v", s, h.maxWaitCap()))
			return
		}
		maxWait = d
	}
	maxWait = min(maxWait, h.maxWaitCap())
	start := h.opts.Clock.Now()
	deadline := start + int64(maxWait)
	var now int64 // the time of the last decision
	for {
		d, err := h.Decide(r.Context(), checks, func() int64 { now = h.opts.Clock.Now(); return now })
		if err != nil {
			if r.Context().Err() != nil {
				return // the client went away
			}
			status := http.StatusInternalServerError
			if errors.Is(err, core.ErrKeyTooLong) || errors.Is(err, core.ErrBadCost) || errors.Is(err, core.ErrEmptyKey) ||
				errors.Is(err, core.ErrUnknownLimiter) || errors.Is(err, core.ErrTooManyChecks) {
				status = http.StatusBadRequest
			}
			problem(w, status, "decision", err.Error())
			return
		}
		pause := max(d.RetryAfter, int64(time.Millisecond))
		if d.Allowed || d.RetryAfter < 0 || deadline-now < pause {
			h.writeWaited(w, d, time.Duration(now-start), now)
			return
		}
		select {
		case <-r.Context().Done():
			return // the client went away: stop waiting, write nothing
		case <-h.stop.stopping:
			// The server stops (stop.go): the last decision now, not
			// at max_wait.
			h.writeWaited(w, d, time.Duration(now-start), now)
			return
		case <-h.opts.Clock.After(pause):
		}
	}
}

// writeWaited writes a /v1/wait answer: the headers and body of /v1/decide
// and EdgeLimit-Waited.
func (h *Host) writeWaited(w http.ResponseWriter, d Decision, waited time.Duration, now int64) {
	lim := h.opts.Config.Limiters[d.Limiter]
	hd := w.Header()
	if d.Stale {
		hd.Set("EdgeLimit-Fail-Policy", d.Policy.String())
	}
	hd.Set("EdgeLimit-Waited", strconv.FormatInt(waited.Milliseconds(), 10))
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
