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
	"sync"
	"sync/atomic"
	"time"
)

// HTTPTransport sends batches to a coordinator's POST /v1/sync.
//
// URL may list several coordinators (comma-separated) of one shared store
// (`edgelimit coordinator --store redis://...`): the transport sends to one
// of them and, when it cannot be reached or answers 502, 503 or 504, sends
// the same batch to the next one at once, and stays with the first that
// answers. Resending is safe: a shared-store coordinator applies a batch at
// most once per (isolate, sequence number), whichever coordinator got it.
// Do not list coordinators that each have their own store (Pebble): each
// would count the deltas it gets alone.
type HTTPTransport struct {
	// URL is the coordinator's base URL, e.g. "http://127.0.0.1:7070", or
	// several, comma-separated, to fail over between.
	URL string
	// Token is the bearer token; empty sends none.
	Token string
	// Client is the HTTP client. Default: one with a 5 s timeout.
	Client *http.Client
	// MaxReplyBytes caps the reply read, in bytes. Default 4 MiB.
	MaxReplyBytes int64

	cur       atomic.Int64 // index in urls of the coordinator in use
	failovers atomic.Int64
	mu        sync.Mutex
	urlsOf    string   // the URL urls was parsed from
	urls      []string // URL split
}

// coordinators returns the URLs of URL (parsed again when it changed).
func (t *HTTPTransport) coordinators() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.urls == nil || t.urlsOf != t.URL {
		t.urls, t.urlsOf = nil, t.URL
		for _, u := range strings.Split(t.URL, ",") {
			if u = strings.TrimRight(strings.TrimSpace(u), "/"); u != "" {
				t.urls = append(t.urls, u)
			}
		}
		if len(t.urls) == 0 {
			t.urls = []string{""}
		}
	}
	return t.urls
}

// Failovers returns how many times the transport moved to the next
// coordinator.
func (t *HTTPTransport) Failovers() int64 { return t.failovers.Load() }

// Current returns the URL of the coordinator in use: the first of URL
// until a failover, then the one the last failover moved to.
func (t *HTTPTransport) Current() string {
	urls := t.coordinators()
	return urls[int(t.cur.Load())%len(urls)]
}

// Sync implements Transport: it posts batch (to the coordinator in use,
// then to the next ones, once each, while they fail; see HTTPTransport)
// and appends the reply to dst. A non-200 answer is an error (ErrRefused)
// carrying the status and the start of the problem description; a 409
// whose problem type is one of the coordinator's sequence anomalies
// (urn:edgelimit:problem:seq_stale, seq_gap, seq_conflict) also matches
// ErrSequence.
func (t *HTTPTransport) Sync(ctx context.Context, batch, dst []byte) ([]byte, error) {
	urls := t.coordinators()
	var err error
	for i := 0; i < len(urls); i++ {
		cur := t.cur.Load()
		var retry bool
		var out []byte
		out, retry, err = t.syncOne(ctx, urls[int(cur)%len(urls)], batch, dst)
		if !retry || ctx.Err() != nil || len(urls) == 1 {
			return out, err
		}
		// Move on, unless another sync already did.
		if t.cur.CompareAndSwap(cur, (cur+1)%int64(len(urls))) {
			t.failovers.Add(1)
		}
	}
	return dst, err
}

// DefaultHTTPTimeout is the timeout of the default HTTP client.
const DefaultHTTPTimeout = 5 * time.Second

var defaultClient = &http.Client{Timeout: DefaultHTTPTimeout}

// do sends one request to a coordinator with the transport's token and
// client (msgpack when it has a body).
func (t *HTTPTransport) do(ctx context.Context, method, url string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/msgpack")
	}
	if t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
	c := t.Client
	if c == nil {
		c = defaultClient
	}
	return c.Do(req)
}

// syncOne posts batch to the coordinator at base; retry reports a failure
// another coordinator may not have (unreachable, 502, 503, 504).
func (t *HTTPTransport) syncOne(ctx context.Context, base string, batch, dst []byte) (_ []byte, retry bool, _ error) {
	resp, err := t.do(ctx, http.MethodPost, base+"/v1/sync", bytes.NewReader(batch))
	if err != nil {
		return dst, true, fmt.Errorf("syncloop: http: %w", err)
	}
	defer resp.Body.Close()
	limit := t.MaxReplyBytes
	if limit <= 0 {
		limit = 4 << 20
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return dst, true, fmt.Errorf("syncloop: http: reading the reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := string(body)
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		if resp.StatusCode == http.StatusConflict && isSeqProblem(body) {
			return dst, false, fmt.Errorf("syncloop: http: %w: %w: %s: %s", ErrRefused, ErrSequence, resp.Status, msg)
		}
		retry := resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable ||
			resp.StatusCode == http.StatusGatewayTimeout
		return dst, retry, fmt.Errorf("syncloop: http: %w: %s: %s", ErrRefused, resp.Status, msg)
	}
	if int64(len(body)) > limit {
		return dst, false, fmt.Errorf("syncloop: http: reply larger than %d bytes", limit)
	}
	return append(dst, body...), false, nil
}

// ErrRefused marks a coordinator answer other than 200 OK.
var ErrRefused = errors.New("coordinator refused the batch")

// ErrSequence marks a batch the coordinator refused for its sequence
// number and applied nothing of: the isolate must start a new incarnation
// (Reincarnator) and resend the same deltas as its batch 1.
var ErrSequence = errors.New("coordinator refused the batch's sequence number")

// isSeqProblem reports whether a problem+json body names a sequence
// anomaly (coordinator/merge/sequence.go).
func isSeqProblem(body []byte) bool {
	var p struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(body, &p) == nil && strings.HasPrefix(p.Type, "urn:edgelimit:problem:seq_")
}
