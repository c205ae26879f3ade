package syncloop

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Probe asks the coordinator in use whether it answers this transport's
// token, without a batch: GET /v1/limiters with the bearer token must
// answer 200 with JSON (a proxy's HTML page is no answer), or 403 with a
// problem+json body (a token with the coordinator's edge role but not its
// read role: known, so valid). A host whose isolates have had nothing to sync for a while
// probes before reporting itself healthy, rather than trusting old sync
// ages. Only the coordinator in use is probed (no failover).
func (t *HTTPTransport) Probe(ctx context.Context) error {
	urls := t.coordinators()
	return t.probe(ctx, urls[int(t.cur.Load())%len(urls)])
}

// probe is Probe of the coordinator at base.
func (t *HTTPTransport) probe(ctx context.Context, base string) error {
	resp, err := t.do(ctx, http.MethodGet, base+"/v1/limiters", nil)
	if err != nil {
		return fmt.Errorf("syncloop: probe: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode == http.StatusForbidden && strings.HasPrefix(ct, "application/problem+json") {
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("syncloop: probe: %w: %s%s", ErrRefused, resp.Status, redirectNote(resp))
	}
	if !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("syncloop: probe: %w: 200 with Content-Type %q, not the coordinator's JSON", ErrRefused, ct)
	}
	return nil
}

// Ready implements Reader: with Time set, until Time took a reading (from
// any transport sharing it) or a coordinator answered this one at all (one
// whose answers carry no time is not waited for), it probes the
// coordinators, the one in use first and then the next ones of the list,
// once each, until one answers (its answer carries its time). It returns
// nil at once after that, and always without Time; else the last probe's
// error.
func (t *HTTPTransport) Ready(ctx context.Context) error {
	if t.Time == nil || t.Time.Read() || t.answered.Load() {
		return nil
	}
	urls := t.coordinators()
	start := int(t.cur.Load()) % len(urls)
	var err error
	for i := range urls {
		if err = t.probe(ctx, urls[(start+i)%len(urls)]); t.answered.Load() {
			break
		}
		if ctx.Err() != nil {
			if hung(ctx) && len(urls) > 1 {
				// Abandoned as hung (Loop.AbandonAttempt): the next read
				// starts with the next coordinator, as a sync does
				// (Sync); before, each read began with the same hung one.
				idx := (start + i) % len(urls)
				t.mu.Lock()
				pref := t.pref
				t.mu.Unlock()
				if idx == pref {
					t.left(time.Now())
				}
				t.failovers.Add(1)
				t.cur.Store(int64((idx + 1) % len(urls)))
			}
			break
		}
	}
	if t.answered.Load() {
		return nil
	}
	return err
}
