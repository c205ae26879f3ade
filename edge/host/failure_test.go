package host

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/failpolicy"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// policyConfig has one approximate limiter per fail policy, a limiter
// without one (the host's default), and a strict one, each 6 a day.
func policyConfig() wire.Config {
	day := int64(24 * time.Hour)
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "open", Algorithm: wire.FixedWindow, Limit: 6, Period: day, FailPolicy: wire.FailOpen},
		{Name: "closed", Algorithm: wire.FixedWindow, Limit: 6, Period: day, FailPolicy: wire.FailClosed},
		{Name: "share", Algorithm: wire.FixedWindow, Limit: 6, Period: day, FailPolicy: wire.FailLocalShare},
		{Name: "default", Algorithm: wire.FixedWindow, Limit: 6, Period: day},
		{Name: "strict", Algorithm: wire.FixedWindow, Limit: 6, Period: day, Mode: wire.Strict},
	}}
}

// warm sends one request to each of n isolates (on a key of its own), so
// each has a batch to sync: an isolate with nothing to sync stays fresh
// (syncloop.Scheduler.Idle).
func (s served) warm(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		s.decide(t, url.Values{"limiter": {"open"}, "key": {"warm-up"}})
	}
}

// fastSync syncs every 20 ms, counts a view stale after 150 ms and backs
// off at most 200 ms after failures (so a healed link is seen at once).
var fastSync = syncloop.Options{Interval: 20 * time.Millisecond, StaleAfter: 150 * time.Millisecond,
	BackoffMax: 200 * time.Millisecond}

// TestCoordinatorDownFailPolicies: four isolates whose coordinator does not
// answer. Once the stale bound passes, /healthz answers 503 with each
// isolate's sync age, and each limiter follows its fail policy on 30
// requests against a limit of 6: open admits what each isolate's last view
// allows (6 each, 24), closed none, local-share 6/4 = 1 per isolate (4),
// a limiter without a policy the host's default (closed here); a strict
// limiter denies at once instead of waiting for a sync. The decisions and
// the staleness show in /metrics.
func TestCoordinatorDownFailPolicies(t *testing.T) {
	s := serve(t, Options{Config: policyConfig(), Isolates: 4, Coordinator: "http://" + deadAddr(t),
		Sync: fastSync, SyncTimeout: 100 * time.Millisecond, RetryWait: 5 * time.Second, FailPolicy: failpolicy.Closed})
	s.warm(t, 4)
	hl := s.waitAllStale(t)
	if hl.Status != "stale" || len(hl.Isolates) != 4 || hl.SyncErrors == 0 {
		t.Fatalf("health %+v", hl)
	}
	for _, ih := range hl.Isolates {
		if !ih.Stale || ih.LastSyncAgeMS != -1 || ih.Failures == 0 {
			t.Errorf("isolate %+v: want stale, no sync ever (age -1), failures > 0", ih)
		}
	}
	for _, tc := range []struct {
		limiter, policy string
		want            int
	}{{"open", "open", 24}, {"closed", "closed", 0}, {"share", "local-share", 4}, {"default", "closed", 0}} {
		allowed := 0
		for i := 0; i < 30; i++ {
			code, _, hd := s.decide(t, url.Values{"limiter": {tc.limiter}, "key": {"k"}})
			if code == 200 {
				allowed++
			}
			if p := hd.Get("EdgeLimit-Fail-Policy"); p != tc.policy {
				t.Errorf("%s: EdgeLimit-Fail-Policy %q, want %q", tc.limiter, p, tc.policy)
			}
			if code == 429 && hd.Get("Retry-After") == "" {
				t.Errorf("%s: a denial without Retry-After", tc.limiter)
			}
		}
		if allowed != tc.want {
			t.Errorf("limiter %s (%s): %d of 30 admitted, want %d", tc.limiter, tc.policy, allowed, tc.want)
		}
	}
	// A strict limiter (default policy closed here) and the same with the
	// open policy: denied without waiting the 5 s retry wait for a sync.
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get(s.url + "/v1/decide?limiter=strict&key=k")
	if err != nil {
		t.Fatalf("a strict request on a stale host waited: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 {
		t.Errorf("strict on a stale host: %d", resp.StatusCode)
	}
	m := s.metrics(t)
	for _, want := range []string{
		`edgelimit_edge_fail_policy_decisions_total{limiter="open",policy="open",result="allowed"} 24`,
		`edgelimit_edge_fail_policy_decisions_total{limiter="closed",policy="closed",result="denied"} 30`,
		`edgelimit_edge_fail_policy_decisions_total{limiter="share",policy="local-share",result="allowed"} 4`,
		`edgelimit_edge_decisions_total{limiter="share",result="denied"} 26`,
		`edgelimit_edge_view_stale{isolate="0"} 1`,
	} {
		i := strings.LastIndex(want, " ")
		if !hasMetric(m, want[:i], want[i+1:]) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Everything admitted (4 warm-ups, 24 open, 4 local share) is
	// buffered, unacknowledged.
	var unsynced float64
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "edgelimit_edge_unsynced_cost{") {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
				unsynced += v
			}
		}
	}
	if unsynced != 32 {
		t.Errorf("unsynced cost %v over the isolates, want the 32 admitted while the coordinator was down", unsynced)
	}
	if !strings.Contains(m, `edgelimit_edge_sync_seconds_count{result="error"}`) || strings.Contains(m, "edgelimit_edge_sync_errors_total 0\n") {
		t.Errorf("metrics do not show the failed syncs:\n%s", m)
	}
}

// TestOpenPolicyHostTakesNoWaitOnStrict: with the open policy a strict
// request on a stale isolate (no lease: the module denies) is admitted by
// the policy, deciding alone, without waiting for a sync that cannot
// come; up to the limit (6) counted on the isolate, then denied with a
// Retry-After of at most the probe interval.
func TestOpenPolicyHostTakesNoWaitOnStrict(t *testing.T) {
	s := serve(t, Options{Config: policyConfig(), Isolates: 1, Coordinator: "http://" + deadAddr(t),
		Sync: fastSync, SyncTimeout: 100 * time.Millisecond, RetryWait: 5 * time.Second})
	s.warm(t, 1)
	s.waitAllStale(t)
	client := &http.Client{Timeout: 3 * time.Second}
	for i := 0; i < 8; i++ {
		resp, err := client.Get(s.url + "/v1/decide?limiter=strict&key=k")
		if err != nil {
			t.Fatalf("waited for a sync on a stale isolate: %v", err)
		}
		var d decisionJSON
		json.NewDecoder(resp.Body).Decode(&d)
		resp.Body.Close()
		if want := map[bool]int{true: 200, false: 429}[i < 6]; resp.StatusCode != want || resp.Header.Get("EdgeLimit-Fail-Policy") != "open" {
			t.Errorf("request %d, strict, open policy, stale: %d %v, want %d", i, resp.StatusCode, resp.Header, want)
		}
		if resp.StatusCode == 429 && d.RetryAfter > int64(syncloop.DefaultProbeInterval) {
			t.Errorf("request %d: retry_after_ns %d past the probe interval", i, d.RetryAfter)
		}
	}
}

// TestLocalShareAllOrNothing: on a stale isolate a multi-check whose other
// limiter is closed is denied and gives back the local share its
// local-share check took; the share (6/6 = 1 per window) then admits one
// request and no more.
func TestLocalShareAllOrNothing(t *testing.T) {
	s := serve(t, Options{Config: policyConfig(), Isolates: 1, ShareIsolates: 6, Coordinator: "http://" + deadAddr(t),
		Sync: fastSync, SyncTimeout: 100 * time.Millisecond})
	s.warm(t, 1)
	s.waitAllStale(t)
	both := url.Values{"limiter": {"share", "closed"}, "key": {"a", "b"}}
	if code, d, hd := s.decide(t, both); code != 429 || d.Limiter != "closed" || hd.Get("EdgeLimit-Fail-Policy") != "closed" {
		t.Fatalf("share + closed: %d %+v %v", code, d, hd)
	}
	one := url.Values{"limiter": {"share"}, "key": {"a"}}
	if code, _, _ := s.decide(t, one); code != 200 {
		t.Fatalf("the share was not given back: %d", code)
	}
	if code, d, _ := s.decide(t, one); code != 429 || d.Remaining != 0 {
		t.Fatalf("past the share of 1: %d %+v", code, d)
	}
}
