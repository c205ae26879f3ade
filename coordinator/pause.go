package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// An operator's pause: POST /v1/limiters/{name}/keys/{key} with the JSON
// body PauseRequest (the admin role) pauses the key fleet-wide, as an
// upstream's 429 would: every isolate that syncs the key hears it with
// its reply and denies the key until the pause ends. The pause is capped
// by the limiter's upstream.max_pause (default 1 h) and never shortens one
// already set; DELETE (a reset) lifts it.

// PauseRequest is the body of POST /v1/limiters/{name}/keys/{key}.
type PauseRequest struct {
	// Pause is how long to pause the key: a duration as
	// wire.ParseDuration reads it ("30s", "10m", "1d"), above 0.
	Pause string `json:"pause"`
}

// ErrSharedPause is returned by PauseKey in shared mode (Redis), which
// keeps no upstream state: HTTP 501. The fleet pause of the control API
// (POST /v1/limiters/{name}/pause/{key}: control.go) works in both modes,
// with a reason, and can be resumed.
var ErrSharedPause = errors.New("coordinator: pausing a key as an upstream would is not supported in shared mode (Redis): use the fleet pause, POST /v1/limiters/{name}/pause/{key} with {\"for\": \"10m\", \"reason\": \"...\"}")

// maxPauseBody caps the body of a pause request, in bytes.
const maxPauseBody = 4096

// PauseKey pauses (limiter, key) for d from now (see above) and returns
// the pause left, capped by the limiter's max_pause.
func (c *Coordinator) PauseKey(ctx context.Context, limiter, key string, d time.Duration) (time.Duration, error) {
	if c.shared != nil {
		return 0, ErrSharedPause
	}
	var left int64
	err := c.do(ctx, func(m *merge.Merger, now int64) (err error) {
		left, err = m.Pause(limiter, key, int64(d), now)
		return err
	})
	return time.Duration(left), err
}

func (c *Coordinator) handlePause(w http.ResponseWriter, r *http.Request) {
	key, ok := c.pathKey(w, r)
	if !ok {
		return
	}
	if r.ContentLength > maxPauseBody {
		c.failErr(w, &http.MaxBytesError{Limit: maxPauseBody})
		return
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPauseBody))
	dec.DisallowUnknownFields()
	var q PauseRequest
	err := dec.Decode(&q)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("a second JSON value after the request")
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			c.failErr(w, err)
			return
		}
		c.fail(w, http.StatusBadRequest, "invalid", "body", "Invalid pause request",
			`the body must be one JSON object {"pause": "10m"}: `+err.Error())
		return
	}
	d, err := wire.ParseDuration(q.Pause)
	if err != nil || d <= 0 {
		detail := "pause must be a duration above 0 (\"30s\", \"10m\", \"1d\")"
		if err != nil {
			detail += ": " + err.Error()
		}
		c.fail(w, http.StatusBadRequest, "invalid", "pause", "Invalid pause", detail)
		return
	}
	if _, err := c.PauseKey(r.Context(), r.PathValue("name"), key, d); err != nil {
		if errors.Is(err, ErrSharedPause) {
			c.fail(w, http.StatusNotImplemented, "not_supported", "", "Not supported", err.Error())
			return
		}
		c.failErr(w, err)
		return
	}
	c.handleGetKey(w, r)
}
