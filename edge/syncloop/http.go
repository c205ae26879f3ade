package syncloop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// HTTPTransport sends batches to a coordinator's POST /v1/sync.
type HTTPTransport struct {
	// URL is the coordinator's base URL, e.g. "http://127.0.0.1:7070".
	URL string
	// Token is the bearer token; empty sends none.
	Token string
	// Client is the HTTP client. Default: one with a 5 s timeout.
	Client *http.Client
	// MaxReplyBytes caps the reply read, in bytes. Default 4 MiB.
	MaxReplyBytes int64
}

// DefaultHTTPTimeout is the timeout of the default HTTP client.
const DefaultHTTPTimeout = 5 * time.Second

var defaultClient = &http.Client{Timeout: DefaultHTTPTimeout}

// Sync implements Transport: it posts batch and appends the reply to dst.
// A non-200 answer is an error (ErrRefused) carrying the status and the
// start of the problem description; a 409 whose problem type is one of the
// coordinator's sequence anomalies (urn:edgelimit:problem:seq_stale,
// seq_gap, seq_conflict) also matches ErrSequence.
func (t *HTTPTransport) Sync(ctx context.Context, batch, dst []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(t.URL, "/")+"/v1/sync", bytes.NewReader(batch))
	if err != nil {
		return dst, fmt.Errorf("syncloop: http: %w", err)
	}
	req.Header.Set("Content-Type", "application/msgpack")
	if t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
	c := t.Client
	if c == nil {
		c = defaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return dst, fmt.Errorf("syncloop: http: %w", err)
	}
	defer resp.Body.Close()
	limit := t.MaxReplyBytes
	if limit <= 0 {
		limit = 4 << 20
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return dst, fmt.Errorf("syncloop: http: reading the reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := string(body)
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		if resp.StatusCode == http.StatusConflict && isSeqProblem(body) {
			return dst, fmt.Errorf("syncloop: http: %w: %w: %s: %s", ErrRefused, ErrSequence, resp.Status, msg)
		}
		return dst, fmt.Errorf("syncloop: http: %w: %s: %s", ErrRefused, resp.Status, msg)
	}
	if int64(len(body)) > limit {
		return dst, fmt.Errorf("syncloop: http: reply larger than %d bytes", limit)
	}
	return append(dst, body...), nil
}

// ErrRefused marks a coordinator answer other than 200 OK.
var ErrRefused = errors.New("coordinator refused the batch")

// ErrSequence marks a batch the coordinator refused for its sequence
// number and applied nothing of: the isolate must start a new incarnation
// (Reincarnator) and resend the same deltas as its batch 1.
var ErrSequence = errors.New("coordinator refused the batch's sequence number")

// isSeqProblem reports whether a problem+json body names a sequence
// anomaly (coordinator/sequence.go).
func isSeqProblem(body []byte) bool {
	var p struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(body, &p) == nil && strings.HasPrefix(p.Type, "urn:edgelimit:problem:seq_")
}
