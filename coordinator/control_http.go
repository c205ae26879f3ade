package coordinator

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The live control API (control.go), JSON in and out; every change needs
// the admin role and answers the ControlView after it:
//
//	GET    /v1/control                              the control state (read role)
//	PUT    /v1/limiters/{name}/limit                {"limit": 10, "reason": "..."}
//	PUT    /v1/limiters/{name}/overrides/{key}      {"limit": 500, "reason": "..."}
//	DELETE /v1/limiters/{name}/overrides/{key}      the key takes the limiter's limit (?reason=...)
//	POST   /v1/limiters/{name}/pause                {"for": "30m", "reason": "..."}: every key
//	DELETE /v1/limiters/{name}/pause                resume (?reason=...)
//	POST   /v1/limiters/{name}/pause/{key}          pause one key
//	DELETE /v1/limiters/{name}/pause/{key}          resume it
//
// ({key}: as in /v1/limiters/{name}/keys/{key}, ?encoding=base64url for
// any bytes.) Refusals are problem+json: 400 invalid (a bad value, field
// named), 404 not_found (unknown limiter, no such pause or override), 501
// not_supported (shared mode over a store without a control record), 503
// unavailable (the store failed: nothing changed).

// LimitRequest is the body of PUT /v1/limiters/{name}/limit and
// .../overrides/{key}.
type LimitRequest struct {
	// Limit is the new limit: 1 to wire.MaxLimit.
	Limit int64 `json:"limit"`
	// Reason is logged with the change; at most ControlMaxReason bytes.
	Reason string `json:"reason,omitempty"`
}

// FleetPauseRequest is the body of POST /v1/limiters/{name}/pause[/{key}].
type FleetPauseRequest struct {
	// For is how long the pause lasts: a duration as wire.ParseDuration
	// reads it ("30s", "10m", "1d"), above 0, at most ControlMaxPause.
	For string `json:"for"`
	// Reason says what the pause stops and why: required, at most
	// ControlMaxReason bytes.
	Reason string `json:"reason"`
}

// maxControlBody caps the body of a control request, in bytes.
const maxControlBody = 4096

func (c *Coordinator) controlRoutes(mux *http.ServeMux) {
	admin := func(h http.HandlerFunc) http.Handler { return c.auth(RoleAdmin, h) }
	mux.Handle("GET /v1/control", c.auth(RoleRead, http.HandlerFunc(c.handleControl)))
	mux.Handle("PUT /v1/limiters/{name}/limit", admin(func(w http.ResponseWriter, r *http.Request) {
		var q LimitRequest
		if !c.decodeJSON(w, r, &q, `{"limit": 10, "reason": "..."}`) {
			return
		}
		c.answerControl(w, r, c.SetLimit(r.Context(), who(r), r.PathValue("name"), "", q.Limit, q.Reason))
	}))
	mux.Handle("PUT /v1/limiters/{name}/overrides/{key...}", admin(func(w http.ResponseWriter, r *http.Request) {
		key, ok := c.pathKey(w, r)
		var q LimitRequest
		if !ok || !c.decodeJSON(w, r, &q, `{"limit": 500, "reason": "..."}`) {
			return
		}
		if q.Limit == 0 {
			c.fail(w, http.StatusBadRequest, "invalid", "limit", "Invalid limit", "limit must be 1 to "+strconv.FormatInt(wire.MaxLimit, 10)+" (2^50; DELETE removes an override)")
			return
		}
		c.answerControl(w, r, c.SetLimit(r.Context(), who(r), r.PathValue("name"), key, q.Limit, q.Reason))
	}))
	mux.Handle("DELETE /v1/limiters/{name}/overrides/{key...}", admin(func(w http.ResponseWriter, r *http.Request) {
		if key, ok := c.pathKey(w, r); ok {
			c.answerControl(w, r, c.SetLimit(r.Context(), who(r), r.PathValue("name"), key, 0, r.URL.Query().Get("reason")))
		}
	}))
	pause := func(key bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			k, ok := "", true
			if key {
				k, ok = c.pathKey(w, r)
			}
			var q FleetPauseRequest
			if !ok || !c.decodeJSON(w, r, &q, `{"for": "30m", "reason": "..."}`) {
				return
			}
			d, err := wire.ParseDuration(q.For)
			if err != nil {
				c.fail(w, http.StatusBadRequest, "invalid", "for", "Invalid pause", `for must be a duration above 0 ("30s", "10m", "1d"): `+err.Error())
				return
			}
			c.answerControl(w, r, c.PauseFleet(r.Context(), who(r), r.PathValue("name"), k, d, q.Reason))
		}
	}
	resume := func(key bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			k, ok := "", true
			if key {
				k, ok = c.pathKey(w, r)
			}
			if ok {
				c.answerControl(w, r, c.ResumeFleet(r.Context(), who(r), r.PathValue("name"), k, r.URL.Query().Get("reason")))
			}
		}
	}
	mux.Handle("POST /v1/limiters/{name}/pause", admin(pause(false)))
	mux.Handle("DELETE /v1/limiters/{name}/pause", admin(resume(false)))
	mux.Handle("POST /v1/limiters/{name}/pause/{key...}", admin(pause(true)))
	mux.Handle("DELETE /v1/limiters/{name}/pause/{key...}", admin(resume(true)))
}

func (c *Coordinator) handleControl(w http.ResponseWriter, r *http.Request) {
	v, err := c.Control(r.Context())
	if err != nil {
		c.failErr(w, err)
		return
	}
	if !principalOf(r.Context()).may(RoleAdmin) {
		for i := range v.Pauses {
			v.Pauses[i].By = byForReaders(v.Pauses[i].By)
		}
		for i := range v.Limiters {
			for j := range v.Limiters[i].Changes {
				v.Limiters[i].Changes[j].By = byForReaders(v.Limiters[i].Changes[j].By)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

// answerControl answers a change: its error, or the control state after
// it.
func (c *Coordinator) answerControl(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case err == nil:
		c.handleControl(w, r)
	case errors.Is(err, errNoPause), errors.Is(err, errNoOverride):
		c.fail(w, http.StatusNotFound, "not_found", "", "Not found", err.Error())
	case errors.Is(err, ErrControl):
		c.fail(w, http.StatusBadRequest, "invalid", "", "Invalid change", err.Error())
	case errors.Is(err, ErrSharedControl):
		c.fail(w, http.StatusNotImplemented, "not_supported", "", "Not supported", err.Error())
	default:
		c.failErr(w, err)
	}
}

// decodeJSON decodes the body of r, one JSON object with the fields of v
// and no other, into v; it answers 400 (showing example) or 413 itself
// and returns false when it cannot.
func (c *Coordinator) decodeJSON(w http.ResponseWriter, r *http.Request, v any, example string) bool {
	if r.ContentLength > maxControlBody {
		c.failErr(w, &http.MaxBytesError{Limit: maxControlBody})
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxControlBody))
	if err == nil {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err = dec.Decode(v); err == nil {
			if _, terr := dec.Token(); terr != io.EOF {
				err = errors.New("a second JSON value after the request")
			} else {
				err = wire.RepeatedJSONKey(body)
			}
		} else {
			err = wire.LocateJSONError(body, -1, err)
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			c.failErr(w, err)
			return false
		}
		c.fail(w, http.StatusBadRequest, "invalid", "body", "Invalid request", "the body must be one JSON object "+example+": "+err.Error())
		return false
	}
	return true
}

// byForReaders is a change's By as a token without the admin role is
// shown it: the roles and the address of who made it, without the token's
// scope. The scope is a plain hash of the token (scope.go), so a reader
// could test guesses of a weak admin token against it offline (the
// README's example token, "ops", is found at once). Admins and the audit
// log see the scope.
func byForReaders(by string) string {
	rest, ok := strings.CutPrefix(by, "token ")
	if !ok {
		return by
	}
	if _, after, ok := strings.Cut(rest, " "); ok {
		return "a token " + after
	}
	return "a token"
}

// who names the maker of a change in the audit log (and a change's By,
// which byForReaders reads back: it is stored as this text in the control
// record): "token SCOPE (ROLES) from ADDR", the bearer token's scope
// (tokenScope: not the token), or "anonymous from ADDR" on a coordinator
// without tokens.
func who(r *http.Request) string {
	p := principalOf(r.Context())
	if p == nil {
		return "anonymous from " + r.RemoteAddr
	}
	return "token " + strings.TrimSuffix(p.scope, "/") + " (" + p.roles.String() + ") from " + r.RemoteAddr
}
