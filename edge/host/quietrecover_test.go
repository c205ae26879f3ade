package host

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestQuietHostProbesBeforeThePolicy: an isolate whose syncs failed and
// that then had no request while the coordinator came back (its loop
// backs off for a minute, so nothing probes) decides its next requests on
// a fresh view, not by the fail policy: the first probes the coordinator
// and waits for it (Host.refresh), the ones that come meanwhile wait for
// the same probe. A strict key filled before the outage stays denied
// under open; a closed key far under its limit is admitted. Before, all
// were decided by the policy: open admitted the full key past its limit
// with the coordinator up.
func TestQuietHostProbesBeforeThePolicy(t *testing.T) {
	s, k := quietFullKey(t)
	defer func() { k.stop(t) }()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, hd := s.decide(t, url.Values{"limiter": {"full"}, "key": {"k"}})
			if code == http.StatusOK || hd.Get("EdgeLimit-Fail-Policy") != "" {
				mu.Lock()
				bad = append(bad, hd.Get("EdgeLimit-Fail-Policy"))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Errorf("%d of 3 requests on the full key after the quiet were admitted or decided by the policy (%q); want denied on a fresh view", len(bad), bad)
	}
	if a, st, _ := s.tally(t, "room", "k", 1); a != 1 || st != 0 {
		t.Errorf("closed, far under its limit, after the quiet: admitted %d, by the policy %d; want admitted on a fresh view", a, st)
	}
	if n := k.count(t, "full", "k"); n > 10 {
		t.Errorf("the coordinator counts %d on the full key, over its limit of 10", n)
	}
}

// quietFullKey starts a coordinator and a host of one isolate whose
// strict key "full" (10 an hour, fail policy open) is full, stops the
// coordinator until the host's view is stale, starts it again and leaves
// the host quiet past twice its probe interval (its loop backs off for a
// minute). The caller stops the coordinator.
func quietFullKey(t *testing.T) (served, *coord) {
	t.Helper()
	dir := t.TempDir()
	hour := int64(time.Hour)
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "full", Algorithm: wire.FixedWindow, Limit: 10, Period: hour, Mode: wire.Strict, FailPolicy: wire.FailOpen},
		{Name: "room", Algorithm: wire.FixedWindow, Limit: 1e9, Period: hour, Mode: wire.Auto, FailPolicy: wire.FailClosed},
	}}
	if toHour := hour - time.Now().UnixNano()%hour; toHour < int64(20*time.Second) {
		time.Sleep(time.Duration(toHour) + 100*time.Millisecond) // the key stays in one window
	}
	k := startCoord(t, dir, "127.0.0.1:0", cfg, nil)
	s := serve(t, Options{Config: cfg, Isolates: 1, Coordinator: "http://" + k.addr, Sync: minuteBackoff,
		SyncTimeout: 200 * time.Millisecond})
	if a, _, _ := s.tally(t, "full", "k", 12); a != 10 {
		k.stop(t)
		t.Fatalf("the full key admitted %d of 12, want its limit 10", a)
	}
	if a, _, _ := s.tally(t, "room", "k", 1); a != 1 {
		k.stop(t)
		t.Fatal("the room key with the coordinator up: denied")
	}
	addr := k.addr
	k.stop(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.tally(t, "room", "other", 1) // the isolate tries to sync, and fails
		if code, hl := s.health(t); code == http.StatusServiceUnavailable && allStale(hl) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not stale 10 s after the coordinator stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	k = startCoord(t, dir, addr, cfg, nil)
	time.Sleep(1500 * time.Millisecond) // quiet, past twice the probe interval
	return s, k
}

// TestQuietProbeAskedAtOnce: two requests on a quiet host find it quiet at
// the same moment, and the other asks for the probe first (forced here:
// it runs in the first's check, beforeProbeAsk). The first waits for that
// probe too and is decided on the fresh view: the full strict key stays
// denied under open. Before, the one that lost the race was decided by the
// policy at once, and open admitted it past the limit with the
// coordinator up (1 of 3 requests at once on a loaded CI, 11 counted of
// 10).
func TestQuietProbeAskedAtOnce(t *testing.T) {
	s, k := quietFullKey(t)
	defer func() { k.stop(t) }()
	type answer struct {
		code   int
		policy string
	}
	other := make(chan answer, 1)
	var calls sync.Mutex
	n := 0
	beforeProbeAsk = func(sl *slot) {
		calls.Lock()
		n++
		first := n == 1
		calls.Unlock()
		if !first {
			return
		}
		until := sl.refreshUntil.Load()
		go func() {
			code, _, hd := s.decide(t, url.Values{"limiter": {"full"}, "key": {"k"}})
			other <- answer{code, hd.Get("EdgeLimit-Fail-Policy")}
		}()
		for deadline := time.Now().Add(5 * time.Second); sl.refreshUntil.Load() == until; {
			if time.Now().After(deadline) {
				t.Error("the other request did not ask for a probe within 5 s")
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	defer func() { beforeProbeAsk = nil }()
	code, _, hd := s.decide(t, url.Values{"limiter": {"full"}, "key": {"k"}})
	o := <-other
	calls.Lock()
	if n < 2 {
		t.Errorf("the quiet check ran %d times, want 2 (both requests found the host quiet)", n)
	}
	calls.Unlock()
	for i, a := range []answer{{code, hd.Get("EdgeLimit-Fail-Policy")}, o} {
		if a.code == http.StatusOK || a.policy != "" {
			t.Errorf("request %d on the full key: status %d, decided by the policy %q; want denied on a fresh view", i+1, a.code, a.policy)
		}
	}
	if c := k.count(t, "full", "k"); c > 10 {
		t.Errorf("the coordinator counts %d on the full key, over its limit of 10", c)
	}
}
