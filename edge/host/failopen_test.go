package host

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// leasedPolicyConfig has leased limiters (auto, the default mode, and
// strict) far from their limit (10^9 an hour) under each fail policy, and
// a local-share one of 40 an hour (10 per isolate of 4).
func leasedPolicyConfig() wire.Config {
	hour := int64(time.Hour)
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "auto-open", Algorithm: wire.FixedWindow, Limit: 1e9, Period: hour, Mode: wire.Auto, FailPolicy: wire.FailOpen},
		{Name: "strict-open", Algorithm: wire.FixedWindow, Limit: 1e9, Period: hour, Mode: wire.Strict, FailPolicy: wire.FailOpen},
		{Name: "auto-closed", Algorithm: wire.FixedWindow, Limit: 1e9, Period: hour, Mode: wire.Auto, FailPolicy: wire.FailClosed},
		{Name: "auto-share", Algorithm: wire.FixedWindow, Limit: 40, Period: hour, Mode: wire.Auto, FailPolicy: wire.FailLocalShare},
	}}
}

// minuteBackoff syncs every 20 ms, stale after 150 ms, and backs off a
// minute after a failure: only requests' probes can see a coordinator
// come back.
var minuteBackoff = syncloop.Options{Interval: 20 * time.Millisecond, StaleAfter: 150 * time.Millisecond,
	BackoffBase: time.Minute, BackoffMax: time.Minute}

// tally sends n decisions of limiter on key and returns how many were
// admitted, how many carried EdgeLimit-Fail-Policy, and the largest
// retry_after_ns of a denial.
func (s served) tally(t *testing.T, limiter, key string, n int) (admitted, stale int, maxRetry int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		code, d, hd := s.decide(t, url.Values{"limiter": {limiter}, "key": {key}})
		if code == http.StatusOK {
			admitted++
		} else {
			maxRetry = max(maxRetry, d.RetryAfter)
		}
		if hd.Get("EdgeLimit-Fail-Policy") != "" {
			stale++
		}
	}
	return admitted, stale, maxRetry
}

// TestFailPoliciesHoldInLeasedModes: four isolates with leased limiters
// sync with a real coordinator, which is then stopped. Once the isolates
// are stale, open admits every request on limiters far from their limit
// (auto and strict: deciding alone), local-share admits its share (10 per
// isolate), closed denies with a Retry-After of at most the probe
// interval. The backoff is a minute, so only the requests' probes can see
// the coordinator come back: once it does, decisions are fresh again.
func TestFailPoliciesHoldInLeasedModes(t *testing.T) {
	dir := t.TempDir()
	cfg := leasedPolicyConfig()
	k := startCoord(t, dir, "127.0.0.1:0", cfg, nil)
	defer func() { k.stop(t) }()
	s := serve(t, Options{Config: cfg, Isolates: 4, Coordinator: "http://" + k.addr, Sync: minuteBackoff,
		SyncTimeout: 200 * time.Millisecond})
	for _, lim := range []string{"auto-open", "strict-open", "auto-closed"} {
		if a, _, _ := s.tally(t, lim, "k", 8); a != 8 {
			t.Fatalf("%s with the coordinator up: %d of 8 admitted", lim, a)
		}
	}
	addr := k.addr
	k.stop(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.tally(t, "auto-open", "k", 4) // traffic: the isolates try to sync, and fail
		if code, hl := s.health(t); code == http.StatusServiceUnavailable && allStale(hl) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the isolates are not all stale 10 s after the coordinator stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	probe := int64(syncloop.DefaultProbeInterval)
	for _, tc := range []struct {
		limiter   string
		n, admits int
	}{{"auto-open", 79, 79}, {"strict-open", 79, 79}, {"auto-closed", 20, 0}, {"auto-share", 80, 40}} {
		a, st, ra := s.tally(t, tc.limiter, "k", tc.n)
		if a != tc.admits || st != tc.n {
			t.Errorf("%s, coordinator down: %d of %d admitted (%d stale), want %d (all stale)", tc.limiter, a, tc.n, st, tc.admits)
		}
		if ra > probe {
			t.Errorf("%s: a stale denial's retry_after_ns %d exceeds the probe interval %d", tc.limiter, ra, probe)
		}
	}
	k = startCoord(t, dir, addr, cfg, nil)
	back := time.Now()
	fresh := 0
	for fresh < 8 {
		if _, st, _ := s.tally(t, "auto-open", "k", 1); st == 0 {
			fresh++
		} else {
			fresh = 0
		}
		if time.Since(back) > 10*time.Second {
			t.Fatalf("decisions still stale 10 s after the coordinator came back (backoff 1 min: no probe)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("every isolate decided on a fresh view %v after the coordinator came back", time.Since(back).Round(time.Millisecond))
	if code, hl := s.health(t); code != http.StatusOK {
		t.Errorf("healthz after recovery: %d %+v", code, hl)
	}
}

// allStale reports whether every isolate of hl is stale.
func allStale(hl Health) bool {
	for _, ih := range hl.Isolates {
		if !ih.Stale {
			return false
		}
	}
	return len(hl.Isolates) > 0
}
