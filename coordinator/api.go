package coordinator

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// The dashboard's JSON API, behind the same tokens as /v1/*:
//
//	GET /v1/limiters                     every limiter: algorithm, limit, period, mode, admitted_total, denied_total
//	GET /v1/limiters/{name}/keys?top=N   the N busiest keys (default 20, at most 100): the key state of each
//	GET /v1/isolates                     isolates seen in the last 10 minutes (of the caller's token), most recent first
//
// Each is bounded work whatever the number of keys: the busiest keys are
// kept as deltas are applied (topn.go), not found by a scan.

// isolatesHorizon is how far back GET /v1/isolates looks.
const isolatesHorizon = 10 * time.Minute

// maxIsolatesListed bounds the answer of GET /v1/isolates.
const maxIsolatesListed = 1000

func (c *Coordinator) handleLimiters(w http.ResponseWriter, r *http.Request) {
	var out []LimiterInfo
	err := c.do(r.Context(), func(m *Merger, _ int64) error {
		out = m.Limiters()
		return nil
	})
	c.answerJSON(w, out, err)
}

func (c *Coordinator) handleTopKeys(w http.ResponseWriter, r *http.Request) {
	n := 20
	if q := r.URL.Query().Get("top"); q != "" {
		v, err := strconv.Atoi(q)
		if err != nil || v < 1 || v > topKeysSize {
			c.fail(w, http.StatusBadRequest, "invalid", "top", "Invalid top",
				"top must be a number between 1 and "+strconv.Itoa(topKeysSize))
			return
		}
		n = v
	}
	var out []*KeyState
	err := c.do(r.Context(), func(m *Merger, now int64) (err error) {
		out, err = m.TopKeys(r.PathValue("name"), n, now)
		return err
	})
	if err == nil && out == nil {
		out = []*KeyState{}
	}
	c.answerJSON(w, out, err)
}

func (c *Coordinator) handleIsolates(w http.ResponseWriter, r *http.Request) {
	var out []IsolateInfo
	scope := scopeOf(r.Context())
	err := c.do(r.Context(), func(m *Merger, now int64) error {
		out = m.Isolates(scope, now, int64(isolatesHorizon), maxIsolatesListed)
		return nil
	})
	if err == nil && out == nil {
		out = []IsolateInfo{}
	}
	c.answerJSON(w, out, err)
}

func (c *Coordinator) answerJSON(w http.ResponseWriter, v any, err error) {
	if err != nil {
		c.failErr(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v) // an error here is a client that went away
}
