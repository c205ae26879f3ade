package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Modes of faultyProxy.
const (
	proxyPass = iota // forward the sync and its reply
	proxySlow        // forward the sync, answer after the host gave up (applied, reply lost)
	proxyDrop        // read the sync and close the connection (a partition: never applied)
	proxyHang        // read the sync and never answer (a partition that drops packets silently)
)

// faultyProxy stands between the edge host and the coordinator on
// loopback and fails syncs as its mode says.
type faultyProxy struct {
	target string
	mode   atomic.Int32
	srv    *httptest.Server
}

func newFaultyProxy(t *testing.T, target string) *faultyProxy {
	p := &faultyProxy{target: target}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *faultyProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	mode := p.mode.Load()
	if mode == proxyHang {
		<-r.Context().Done() // until the client gives up
		return
	}
	if mode == proxyDrop {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
		return
	}
	req, _ := http.NewRequest(r.Method, p.target+r.URL.Path, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(resp.Body)
	if mode == proxySlow {
		time.Sleep(300 * time.Millisecond) // the host's sync timeout is 100 ms
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	w.Write(reply)
}

// bigConfig is one approximate limiter with room for every request.
func bigConfig() wire.Config {
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "open", Algorithm: wire.FixedWindow, Limit: 1_000_000, Period: int64(24 * time.Hour)}}}
}

// admit sends n requests for key and fails unless all are admitted.
func (s served) admit(t *testing.T, key string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if code, d, _ := s.decide(t, url.Values{"limiter": {"open"}, "key": {key}}); code != 200 {
			t.Fatalf("request %d on %s: %d %+v", i, key, code, d)
		}
	}
}

// waitCount polls the coordinator until key's count is want (at most
// 10 s), then checks it stays there over a few more syncs (no batch is
// applied twice).
func waitCount(t *testing.T, k *coord, key string, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for k.count(t, "open", key) != want {
		if time.Now().After(deadline) {
			t.Fatalf("coordinator count of %s is %d after 10s, want %d", key, k.count(t, "open", key), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if got := k.count(t, "open", key); got != want {
		t.Fatalf("coordinator count of %s moved from %d to %d", key, want, got)
	}
}

// TestSlowAndPartitionedCoordinatorLoseNothing: an edge host syncs with a
// real coordinator (Pebble on disk) through a proxy on loopback. While the
// coordinator answers too late (the batch is applied, the reply lost) and
// then while the link is cut, the host goes stale (/healthz 503) and keeps
// deciding by its policy; once the link heals, it is healthy again and the
// coordinator counts every admitted request exactly once.
func TestSlowAndPartitionedCoordinatorLoseNothing(t *testing.T) {
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", bigConfig(), nil)
	defer k.stop(t)
	p := newFaultyProxy(t, "http://"+k.addr)
	s := serve(t, Options{Config: bigConfig(), Isolates: 2, Coordinator: p.srv.URL, Sync: fastSync,
		SyncTimeout: 100 * time.Millisecond})
	s.admit(t, "k", 20)
	waitCount(t, k, "k", 20)
	for _, mode := range []int32{proxySlow, proxyDrop} {
		p.mode.Store(mode)
		s.admit(t, "k", 20)
		if hl := s.waitStatus(t, "stale"); hl.SyncErrors == 0 {
			t.Fatalf("mode %d: stale without sync errors: %+v", mode, hl)
		}
		s.admit(t, "k", 10) // decided on the stale view by the open policy
	}
	p.mode.Store(proxyPass)
	s.waitHealth(t, http.StatusOK)
	waitCount(t, k, "k", 80)
	if m := s.metrics(t); !hasMetric(m, `edgelimit_edge_unacked_cost{isolate="0"}`, "0") {
		t.Errorf("unacked cost after recovery:\n%s", m)
	}
}

// TestCoordinatorRestartLosesNothing: the coordinator stops (its store
// closed) and restarts on the same address and directory; the edge host
// goes stale meanwhile and its buffered cost reaches the restarted
// coordinator, counted once.
func TestCoordinatorRestartLosesNothing(t *testing.T) {
	dir := t.TempDir()
	k := startCoord(t, dir, "127.0.0.1:0", bigConfig(), nil)
	addr := k.addr
	s := serve(t, Options{Config: bigConfig(), Isolates: 2, Coordinator: "http://" + addr, Sync: fastSync,
		SyncTimeout: 100 * time.Millisecond})
	s.admit(t, "k", 20)
	waitCount(t, k, "k", 20)
	k.stop(t)
	s.admit(t, "k", 20)
	s.waitHealth(t, http.StatusServiceUnavailable)
	k = startCoord(t, dir, addr, bigConfig(), nil)
	defer k.stop(t)
	s.waitHealth(t, http.StatusOK)
	waitCount(t, k, "k", 40)
}

// TestTokenRefused: a coordinator that requires a token refuses the edge
// host's wrong one (401): every sync fails, nothing is applied, the host
// goes stale (/healthz 503, sync errors counted) and decides by its fail
// policy, the cost buffered in the isolate. Once the coordinator accepts
// the token (restarted with it added), the buffered cost arrives, once.
func TestTokenRefused(t *testing.T) {
	dir := t.TempDir()
	k := startCoord(t, dir, "127.0.0.1:0", bigConfig(), []string{"right-token"})
	s := serve(t, Options{Config: bigConfig(), Isolates: 1, Coordinator: "http://" + k.addr, Token: "wrong-token",
		Sync: fastSync, SyncTimeout: 100 * time.Millisecond})
	s.admit(t, "k", 5)
	hl := s.waitAllStale(t)
	if hl.SyncErrors == 0 || hl.Isolates[0].Failures == 0 {
		t.Fatalf("health %+v", hl)
	}
	s.admit(t, "k", 5) // the open policy: decided from the last view
	if n := k.count(t, "open", "k"); n != 0 {
		t.Fatalf("a refused token applied %d", n)
	}
	if m := s.metrics(t); hasMetric(m, `edgelimit_edge_unacked_cost{isolate="0"}`, "0") {
		t.Errorf("the refused batch is not shown as unacknowledged:\n%s", m)
	}
	addr := k.addr
	k.stop(t)
	k = startCoord(t, dir, addr, bigConfig(), []string{"right-token", "wrong-token"})
	defer k.stop(t)
	s.waitHealth(t, http.StatusOK)
	waitCount(t, k, "k", 10)
}

// TestIsolateTrapThroughHost: an isolate whose module traps (memory
// exhausted by a key flood under a tiny memory cap) answers that request
// 500, restarts, and serves the next; /healthz and /metrics count the
// restart. What the isolate had not synced is lost (the restarted isolate
// syncs under a new id).
func TestIsolateTrapThroughHost(t *testing.T) {
	s := serve(t, Options{Config: bigConfig(), Isolates: 1, Runtime: isolate.Options{MemoryLimitPages: 8}})
	long := strings.Repeat("x", 200)
	trapped := false
	for i := 0; i < 50_000 && !trapped; i++ {
		resp, err := http.Get(s.url + "/v1/decide?limiter=open&key=" + long + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
		case 500:
			if !strings.Contains(string(body), "trapped") {
				t.Fatalf("500 without the trap: %s", body)
			}
			trapped = true
		default:
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if !trapped {
		t.Fatal("no trap from a key flood under an 8-page memory cap")
	}
	s.admit(t, "after", 1)
	if code, hl := s.health(t); code != 200 || hl.Isolates[0].Restarts != 1 || !strings.HasSuffix(hl.Isolates[0].ID, "/r1") {
		t.Errorf("health after the trap: %d %+v", code, hl)
	}
	if m := s.metrics(t); !hasMetric(m, `edgelimit_edge_isolate_restarts_total{isolate="0"}`, "1") {
		t.Errorf("metrics do not count the restart:\n%s", m)
	}
}

// A coordinator that comes back without the isolates' state (a new data
// directory) refuses their next sequence numbers (409); the host's
// isolates start new incarnations and their deltas count.
func TestCoordinatorLostStateIsolatesReincarnate(t *testing.T) {
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", bigConfig(), nil)
	addr := k.addr
	s := serve(t, Options{Config: bigConfig(), Isolates: 2, Coordinator: "http://" + addr, Sync: fastSync,
		SyncTimeout: 100 * time.Millisecond})
	s.admit(t, "k", 20)
	waitCount(t, k, "k", 20)
	k.stop(t)
	k = startCoord(t, t.TempDir(), addr, bigConfig(), nil)
	defer k.stop(t)
	s.admit(t, "k", 20)
	waitCount(t, k, "k", 20) // the 20 admitted after the restart, under new incarnations
}

// TestSilentPartitionRecoversInASecond: the link to the coordinator drops
// packets silently for 6 s (each sync waits out its timeout, 5 s by
// default) while requests keep coming. Once the link is back the host is
// healthy and counts again within about a second: a request on a stale
// view abandons an attempt in flight for over hungAfter (1 s) and probes
// again. Before, the attempt started in the partition held the probes
// until its timeout, and the host stayed stale about 4 s after the link
// was back.
func TestSilentPartitionRecoversInASecond(t *testing.T) {
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", bigConfig(), nil)
	defer k.stop(t)
	p := newFaultyProxy(t, "http://"+k.addr)
	s := serve(t, Options{Config: bigConfig(), Isolates: 1, Coordinator: p.srv.URL})
	s.admit(t, "k", 5)
	waitCount(t, k, "k", 5)
	admitted := int64(5)
	request := func() {
		if code, _, _ := s.decide(t, url.Values{"limiter": {"open"}, "key": {"k"}}); code == 200 {
			admitted++
		}
		time.Sleep(50 * time.Millisecond)
	}
	retryStarved(t, func() string {
		p.mode.Store(proxyHang)
		for end := time.Now().Add(6 * time.Second); time.Now().Before(end); {
			request()
		}
		if code, _ := s.health(t); code != 503 {
			t.Fatalf("healthz %d after 6 s of a silent partition, want 503", code)
		}
		p.mode.Store(proxyPass)
		back := time.Now()
		for {
			request()
			if code, _ := s.health(t); code == 200 {
				break
			}
			if time.Since(back) > 8*time.Second {
				t.Fatal("still not healthy 8 s after the link came back")
			}
		}
		took := time.Since(back)
		t.Logf("healthy again %v after the link came back", took.Round(time.Millisecond))
		if took > 2*time.Second {
			return fmt.Sprintf("healthy again %v after the link came back, want within about a second (hungAfter)", took.Round(time.Millisecond))
		}
		return ""
	})
	waitCount(t, k, "k", admitted)
}

// An isolate that traps on an upstream observation (memory exhausted by
// distinct keys under a tiny cap) is logged as one that traps deciding
// is, and the host's other isolates still hear of the answer: before, the
// trap went unlogged and Observe returned at the first isolate that
// failed, so those after it never applied the observation.
func TestObserveTrapLoggedOthersHear(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "up", Algorithm: wire.FixedWindow, Limit: 1_000_000, Period: int64(time.Hour), Upstream: &wire.UpstreamConfig{}}}}
	var logs lockedBuffer
	s := serve(t, Options{Config: cfg, Isolates: 2, Runtime: isolate.Options{MemoryLimitPages: 8},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	long := strings.Repeat("o", 200)
	now := time.Now().UnixNano()
	var err error
	n := 0
	for ; n < 50_000 && err == nil; n++ {
		_, err = s.h.Observe(ctx, ObserveRequest{Limiter: "up", Key: long + strconv.Itoa(n), Status: 429,
			Headers: map[string]string{"Retry-After": "3000"}}, now)
	}
	if !errors.Is(err, isolate.ErrTrap) {
		t.Fatalf("after %d observations: %v, want a trap under an 8-page memory cap", n, err)
	}
	if !strings.Contains(logs.String(), "the isolate trapped and restarted") {
		t.Fatalf("the trap was not logged: %s", logs.String())
	}
	// Each isolate got the observation that trapped the first: both
	// restarted (they hold the same keys), or the second holds the pause.
	last := long + strconv.Itoa(n-1)
	for i, sl := range s.h.slots {
		if sl.iso.Restarts() > 0 {
			continue
		}
		sl.mu.Lock()
		d, derr := sl.iso.Decide(ctx, 0, last, 1, now)
		sl.mu.Unlock()
		if derr != nil || d.Allowed {
			t.Errorf("isolate %d neither restarted nor paused on the observed key: %+v %v", i, d, derr)
		}
	}
}
