package syncloop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgelimit/edgelimit/clock"
)

// HTTPTransport sends batches to a coordinator's POST /v1/sync.
//
// URL may list several coordinators (comma-separated) of one shared store
// (`edgelimit coordinator --store redis://...`). Each transport prefers
// one of them, Preferred(ID, len(list)), so that isolates with different
// ids spread their syncs over the list. When the coordinator in use cannot
// be reached (including a timeout of Client: a hung coordinator is left
// after one sync timeout) or answers 502, 503 or 504, the transport sends
// the same batch to the next one at once, and stays with the first that
// answers. An attempt whose context ends before an answer (the caller
// abandoned it as hung) makes the next attempt start with the next one.
// While away from its preferred coordinator it tries it again, first
// ReturnAfter after leaving it, then after twice as long at each failed
// try (at most 8 times ReturnAfter): a sync then goes to the preferred one
// first, for at most ReturnTimeout, and the transport returns to it when
// it answers.
// Resending is safe: a shared-store coordinator applies a batch at most
// once per (isolate, sequence number), whichever coordinator got it. Do
// not list coordinators that each have their own store (Pebble): each
// would count the deltas it gets alone.
type HTTPTransport struct {
	// URL is the coordinator's base URL, e.g. "http://127.0.0.1:7070", or
	// several, comma-separated, to fail over between.
	URL string
	// ID is the isolate's id: it picks the preferred coordinator of URL's
	// list (Preferred). Empty prefers the first.
	ID string
	// Token is the bearer token; empty sends none.
	Token string
	// Client is the HTTP client. Default: one with a 5 s timeout that
	// follows no redirect (NoRedirect).
	Client *http.Client
	// MaxReplyBytes caps the reply read, in bytes. Default DefaultMaxReplyBytes.
	MaxReplyBytes int64
	// ReturnAfter is how long after leaving its preferred coordinator the
	// transport first tries it again (doubled after each failed try, up
	// to 8 times ReturnAfter). Default DefaultReturnAfter (5 s).
	ReturnAfter time.Duration
	// ReturnTimeout bounds a try of the preferred coordinator while away
	// from it: one that has not answered by then is not back, and the
	// batch goes to the one in use in the same sync. Default
	// DefaultReturnTimeout (250 ms); at most Client's timeout.
	ReturnTimeout time.Duration
	// Time, when set, takes a reading of the coordinator's clock from
	// every answer to a sync or a probe that carries one (clock.Header,
	// any status): the isolate then runs on the coordinator's time. Nil:
	// none taken.
	Time *clock.Offset
	// Uncounted, when set, is called with the coordinator's
	// Edgelimit-Uncounted header (limiter names, comma-separated) when a
	// sync's reply carries one: the coordinator applied the batch without
	// the items of those limiters (not granted to the token, or not run
	// by the coordinator). Nil: ignored.
	Uncounted func(limiters string)

	cur       atomic.Int64 // index in urls of the coordinator in use
	failovers atomic.Int64
	returns   atomic.Int64
	mu        sync.Mutex
	urlsOf    string        // the URL urls was parsed from
	urls      []string      // URL split
	pref      int           // Preferred(ID, len(urls))
	returnAt  time.Time     // when to try the preferred coordinator again; under mu
	answered  atomic.Bool   // a coordinator answered a request (Ready)
	returnGap time.Duration // the wait before returnAt; under mu
}

// DefaultReturnAfter is the default HTTPTransport.ReturnAfter.
const DefaultReturnAfter = 5 * time.Second

// DefaultReturnTimeout is the default HTTPTransport.ReturnTimeout. A try
// of a preferred coordinator that hung (stopped with SIGSTOP) waited the
// whole sync timeout, or until a request abandoned it as hung: each
// return try made the isolate's view stale, and an approximate limiter of
// 40 a second admitted 73-86 in those windows under the open policy.
const DefaultReturnTimeout = 250 * time.Millisecond

// Preferred returns the index, in a list of n coordinators, of the one an
// isolate named id prefers: FNV-1a 64 of id's bytes modulo n (0 when n is
// 1 or less, or id is empty). The JavaScript package (edge/js/src/index.js, preferredIndex)
// computes the same.
func Preferred(id string, n int) int {
	if n <= 1 || id == "" {
		return 0
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return int(h % uint64(n))
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
		t.pref = Preferred(t.ID, len(t.urls))
		t.cur.Store(int64(t.pref))
		t.returnAt, t.returnGap = time.Time{}, 0
	}
	return t.urls
}

// returnTimeout is ReturnTimeout or its default.
func (t *HTTPTransport) returnTimeout() time.Duration {
	if t.ReturnTimeout > 0 {
		return t.ReturnTimeout
	}
	return DefaultReturnTimeout
}

// returnDue reports whether a sync away from the preferred coordinator
// should try it first, and if so schedules the next try (twice the wait
// of the last, at most 8 times ReturnAfter) in case this one fails.
func (t *HTTPTransport) returnDue(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Before(t.returnAt) {
		return false
	}
	base := t.ReturnAfter
	if base <= 0 {
		base = DefaultReturnAfter
	}
	t.returnGap = min(max(2*t.returnGap, base), 8*base)
	t.returnAt = now.Add(t.returnGap)
	return true
}

// left records that the transport left its preferred coordinator at now:
// it tries it again ReturnAfter later.
func (t *HTTPTransport) left(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	base := t.ReturnAfter
	if base <= 0 {
		base = DefaultReturnAfter
	}
	t.returnGap, t.returnAt = 0, now.Add(base)
}

// Returns returns how many times the transport returned to its preferred
// coordinator after failing over from it.
func (t *HTTPTransport) Returns() int64 { return t.returns.Load() }

// Failovers returns how many times the transport moved to the next
// coordinator.
func (t *HTTPTransport) Failovers() int64 { return t.failovers.Load() }

// Current returns the URL of the coordinator in use: the preferred one
// (Preferred) until a failover, then the one that last answered.
func (t *HTTPTransport) Current() string {
	urls := t.coordinators()
	return urls[int(t.cur.Load())%len(urls)]
}

// Sync implements Transport: it posts batch (to the coordinator in use,
// or first to the preferred one when a return is due, then to the next
// ones, once each, while they fail; see HTTPTransport) and appends the
// reply to dst. A non-200 answer is an error (ErrRefused) carrying the
// status and the start of the problem description; a 409 whose problem
// type is one of the coordinator's sequence anomalies
// (urn:edgelimit:problem:seq_stale, seq_gap, seq_conflict) also matches
// ErrSequence.
func (t *HTTPTransport) Sync(ctx context.Context, batch, dst []byte) ([]byte, error) {
	urls := t.coordinators()
	n := len(urls)
	t.mu.Lock()
	pref := t.pref
	t.mu.Unlock()
	inUse := int(t.cur.Load()) % n
	returning := inUse != pref && t.returnDue(time.Now())
	// The order tried: the preferred one when returning, then the one in
	// use and the ones after it.
	order := make([]int, 0, n+1)
	if returning {
		order = append(order, pref)
	}
	for i := 0; i < n; i++ {
		if idx := (inUse + i) % n; !returning || idx != pref {
			order = append(order, idx)
		}
	}
	var err error
	for _, idx := range order {
		var retry bool
		var out []byte
		if returning && idx == pref {
			rctx, cancel := context.WithTimeout(ctx, t.returnTimeout())
			out, retry, err = t.syncOne(rctx, urls[idx], batch, dst)
			cancel()
		} else {
			out, retry, err = t.syncOne(ctx, urls[idx], batch, dst)
		}
		if retry && hung(ctx) && n > 1 && !(returning && idx == pref) {
			// Ended from outside before an answer: a request found the
			// attempt hung and abandoned it (the edge host's probeSlot,
			// after a second, shorter than a sync timeout). The next
			// attempt starts with the next coordinator, as a timeout
			// would have moved it; before, it went to the same hung
			// one, and edges under load, whose requests abandon every
			// attempt within the sync timeout, never left a coordinator
			// stopped with SIGSTOP (stale for the whole 20 s).
			t.failovers.Add(1)
			if idx == pref {
				t.left(time.Now())
			}
			// An attempt ended because another reply answered its batch
			// (EndAttempt) is no failover: before, each such end moved
			// the isolate on (53 failovers in 7 s between two healthy
			// coordinators, and back to a hung one within a second).
			t.cur.Store(int64((idx + 1) % n))
			return out, err
		}
		if !retry || ctx.Err() != nil || n == 1 {
			if !retry && idx != inUse {
				t.cur.Store(int64(idx)) // it answered: stay with it
				if idx == pref {
					t.returns.Add(1)
				}
			}
			return out, err
		}
		if returning && idx == pref {
			continue // still down: back to the one in use, no failover
		}
		// The one tried failed: move on to the next.
		t.failovers.Add(1)
		if idx == pref {
			t.left(time.Now())
		}
	}
	return dst, err
}

// DefaultHTTPTimeout is the timeout of the default HTTP client.
const DefaultHTTPTimeout = 5 * time.Second

var defaultClient = &http.Client{Timeout: DefaultHTTPTimeout, CheckRedirect: NoRedirect}

// do sends one request to a coordinator with the transport's token and
// client (msgpack when it has a body), and takes the reading of the
// coordinator's clock its answer carries (Time).
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
	if t.Time == nil {
		return c.Do(req)
	}
	sent := t.Time.Base.Now()
	resp, err := c.Do(req)
	if err == nil {
		t.answered.Store(true)
		if remote, perr := strconv.ParseInt(resp.Header.Get(clock.Header), 10, 64); perr == nil {
			t.Time.Observe(sent, t.Time.Base.Now(), remote)
		}
	}
	return resp, err
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
		limit = DefaultMaxReplyBytes
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
		if resp.StatusCode == http.StatusBadRequest && isProblem(body, skewProblem) {
			return dst, false, fmt.Errorf("syncloop: http: %w: %w: %s: %s", ErrRefused, ErrClockSkew, resp.Status, msg)
		}
		retry := resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable ||
			resp.StatusCode == http.StatusGatewayTimeout
		return dst, retry, fmt.Errorf("syncloop: http: %w: %s%s: %s", ErrRefused, resp.Status, redirectNote(resp), msg)
	}
	if int64(len(body)) > limit {
		return dst, false, fmt.Errorf("syncloop: http: reply larger than %d bytes", limit)
	}
	if err := notAReply(resp, body); err != nil {
		return dst, true, err
	}
	if u := resp.Header.Get(UncountedHeader); u != "" && t.Uncounted != nil {
		t.Uncounted(u)
	}
	return append(dst, body...), false, nil
}

// UncountedHeader names, in a sync's reply, the limiters whose items the
// coordinator took out of the batch and did not count (see
// HTTPTransport.Uncounted).
const UncountedHeader = "Edgelimit-Uncounted"

// ErrRefused marks a coordinator answer other than 200 OK.
var ErrRefused = errors.New("coordinator refused the batch")

// ErrSequence marks a batch the coordinator refused for its sequence
// number and applied nothing of: the isolate must start a new incarnation
// (Reincarnator) and resend the same deltas as its batch 1.
var ErrSequence = errors.New("coordinator refused the batch's sequence number")

// ErrClockSkew marks a batch the coordinator refused for a time or window
// ahead of its clock by more than its allowed skew (400 clock_skew), and
// applied nothing of: the isolate takes it back (Recaller) and cuts it
// again at the coordinator's time, which the refusal's answer carried.
var ErrClockSkew = errors.New("coordinator refused the batch's times")

// isSeqProblem reports whether a problem+json body names a sequence
// anomaly (coordinator/merge/sequence.go).
func isSeqProblem(body []byte) bool { return isProblem(body, "urn:edgelimit:problem:seq_") }

// skewProblem is the problem type of a batch refused for its times
// (coordinator/merge/times.go).
const skewProblem = "urn:edgelimit:problem:clock_skew"

// isProblem reports whether a problem+json body's type starts with prefix.
func isProblem(body []byte, prefix string) bool {
	var p struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(body, &p) == nil && strings.HasPrefix(p.Type, prefix)
}

// hung reports whether ctx, an attempt's, ended as hung: abandoned
// (Loop.AbandonAttempt) or past its deadline, not ended because its batch
// was answered (Loop.EndAttempt) or the loop stopped.
func hung(ctx context.Context) bool {
	c := context.Cause(ctx)
	return errors.Is(c, ErrAbandoned) || errors.Is(c, context.DeadlineExceeded)
}
