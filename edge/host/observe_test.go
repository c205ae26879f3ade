package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// fleet starts a coordinator (Pebble on disk, loopback HTTP) and n hosts
// of two isolates each syncing with it every 20 ms (SyncRetry waits 1 s).
func fleet(t *testing.T, cfg wire.Config, n int) []*httptest.Server {
	return fleetWait(t, cfg, n, time.Second)
}

// fleetWait is fleet with SyncRetry requests waiting up to retryWait.
func fleetWait(t *testing.T, cfg wire.Config, n int, retryWait time.Duration) []*httptest.Server {
	t.Helper()
	c, err := coordinator.Open(coordinator.Options{Dir: t.TempDir(), Config: cfg, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- c.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served; c.Close() })
	var srvs []*httptest.Server
	for i := 0; i < n; i++ {
		h, err := New(context.Background(), Options{Config: cfg, Isolates: 2, Coordinator: "http://" + ln.Addr().String(),
			Sync: syncloop.Options{Interval: 20 * time.Millisecond}, RetryWait: retryWait, IDPrefix: "h" + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h.Handler())
		t.Cleanup(func() { srv.Close(); h.Close() })
		srvs = append(srvs, srv)
	}
	return srvs
}

func observe(t *testing.T, srv *httptest.Server, body string) (int, ObserveResponse) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v1/observe", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var o ObserveResponse
	json.NewDecoder(resp.Body).Decode(&o)
	return resp.StatusCode, o
}

func upstreamConfig(mode string) wire.Config {
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "llm", Algorithm: wire.FixedWindow, Limit: 1000, Period: int64(time.Second), Mode: mode,
			Upstream: &wire.UpstreamConfig{CircuitFailures: 3, CircuitOpen: int64(300 * time.Millisecond)}}}}
}

// TestFleetPauseThroughCoordinator: one host hears 429 Retry-After: 30;
// it denies the key at once, and the other host denies it within a few
// syncs, with the pause's retry-after, while other keys flow.
func TestFleetPauseThroughCoordinator(t *testing.T) {
	for _, mode := range []string{wire.Approximate, wire.Auto} {
		t.Run(mode, func(t *testing.T) {
			srvs := fleet(t, upstreamConfig(mode), 2)
			q := url.Values{"limiter": {"llm"}, "key": {"acct-1"}}
			for _, s := range srvs {
				if resp, _ := get(t, s, q); resp.StatusCode != 200 {
					t.Fatalf("before the 429: %d, want 200", resp.StatusCode)
				}
			}
			code, o := observe(t, srvs[0], `{"limiter":"llm","key":"acct-1","status":429,"headers":{"Retry-After":"30"}}`)
			if code != 200 || o.PausedNS < 29e9 || o.PausedNS > 30e9 {
				t.Fatalf("observe: %d %+v, want 200 and a pause of 30 s", code, o)
			}
			for i := 0; i < 4; i++ { // every isolate of the observing host
				resp, d := get(t, srvs[0], q)
				if resp.StatusCode != 429 || d.RetryAfter < 29e9 || resp.Header.Get("Retry-After") != "30" {
					t.Fatalf("observing host after the 429: %d %+v Retry-After %q, want 429 for 30 s", resp.StatusCode, d, resp.Header.Get("Retry-After"))
				}
			}
			// The other host learns through the coordinator: an isolate that
			// syncs the key hears of the pause in its reply; one that has
			// nothing to sync learns with the first request it admits (at
			// most one per isolate per pause).
			deadline := time.Now().Add(5 * time.Second)
			leaked, denied := 0, 0
			for denied < 8 {
				resp, d := get(t, srvs[1], q)
				if resp.StatusCode == 429 {
					if d.RetryAfter < 25e9 {
						t.Fatalf("the other host denies with retry-after %d ns, want the pause (~30 s)", d.RetryAfter)
					}
					denied++
				} else {
					leaked++
					denied = 0
				}
				if time.Now().After(deadline) {
					t.Fatal("the other host still admits the paused key after 5 s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			// Each of its isolates admits only until its next reply; the
			// exact bound (one per isolate per pause) is checked without
			// wall-clock timing in wasm/core (TestPauseReachesTheFleet).
			if leaked > 10 {
				t.Fatalf("the other host admitted %d requests after the pause", leaked)
			}
			if resp, _ := get(t, srvs[1], url.Values{"limiter": {"llm"}, "key": {"acct-2"}}); resp.StatusCode != 200 {
				t.Fatalf("another key: %d, want 200 (the pause is per key)", resp.StatusCode)
			}
		})
	}
}

// TestFleetCircuit: three 502s open the key's circuit on every host; once
// the open time is over exactly one probe passes across the fleet; its
// success closes the circuit everywhere.
func TestFleetCircuit(t *testing.T) {
	srvs := fleet(t, upstreamConfig(wire.Approximate), 2)
	q := url.Values{"limiter": {"llm"}, "key": {"acct-1"}}
	get(t, srvs[1], q) // the key is known on both hosts
	var o ObserveResponse
	for i := 0; i < 3; i++ {
		_, o = observe(t, srvs[0], `{"limiter":"llm","key":"acct-1","status":502}`)
	}
	if o.Circuit != "open" {
		t.Fatalf("after 3 failures the circuit is %q, want open", o.Circuit)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if resp, _ := get(t, srvs[1], q); resp.StatusCode == 429 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other host still admits after the fleet's circuit opened")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Past the open time (at most 300 ms): one probe, fleet-wide.
	time.Sleep(400 * time.Millisecond)
	admitted, by := 0, -1
	end := time.Now().Add(600 * time.Millisecond)
	for i := 0; time.Now().Before(end); i++ {
		if resp, _ := get(t, srvs[i%2], q); resp.StatusCode == 200 {
			admitted++
			by = i % 2
		}
		time.Sleep(5 * time.Millisecond)
	}
	if admitted != 1 {
		t.Fatalf("%d requests passed the half-open circuit, want exactly one probe", admitted)
	}
	if _, o := observe(t, srvs[by], `{"limiter":"llm","key":"acct-1","status":200}`); o.Circuit != "closed" {
		t.Fatalf("after the probe's success the circuit is %q, want closed", o.Circuit)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		ok := true
		for i := 0; i < 4; i++ {
			if resp, _ := get(t, srvs[i%2], q); resp.StatusCode != 200 {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fleet does not admit 5 s after the probe succeeded")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Bad observations are refused with 400 and change nothing.
func TestObserveRefusesBadInput(t *testing.T) {
	h, srv := observeHost(t)
	for _, body := range []string{
		`{"limiter":"nope","key":"k","status":429}`,
		`{"limiter":"llm","key":"","status":429}`,
		`{"limiter":"llm","key":"k","status":-1}`,
		`{"limiter":"llm","key":"k","status":1000}`,
		`{"limiter":"llm","key":"k","status":429,"extra":1}`,
		`not json`,
		// A second document after the first is refused, not ignored, and
		// the first is not applied (k2 is not paused below).
		`{"limiter":"llm","key":"k2","status":429,"headers":{"Retry-After":"30"}} {"limiter":"llm","key":"k2","status":200}`,
		`{"limiter":"llm","key":"k2","status":429,"headers":{"Retry-After":"30"}} x`,
	} {
		if code, _ := observe(t, srv, body); code != 400 {
			t.Errorf("%s: %d, want 400", body, code)
		}
	}
	if resp, _ := get(t, srv, url.Values{"limiter": {"llm"}, "key": {"k2"}}); resp.StatusCode != 200 {
		t.Fatalf("k2 after refused observations: %d, want 200 (not paused)", resp.StatusCode)
	}
	if code, _ := observe(t, srv, "{\"limiter\":\"llm\",\"key\":\"k3\",\"status\":200}\n \t"); code != 200 {
		t.Fatalf("one document and white space: %d, want 200", code)
	}
	// Garbage header values are ignored, with the reason; the 429 still pauses.
	code, o := observe(t, srv, `{"limiter":"llm","key":"k","status":429,"headers":{"Retry-After":"soon","X-RateLimit-Reset":"-5"}}`)
	if code != 200 || o.Ignored == "" || o.PausedNS <= 0 {
		t.Fatalf("garbage headers: %d %+v, want 200, a reason and a pause", code, o)
	}
	if resp, _ := get(t, srv, url.Values{"limiter": {"llm"}, "key": {"k"}}); resp.StatusCode != 429 {
		t.Fatalf("after a 429 without a usable Retry-After: %d, want 429 (a backoff pause)", resp.StatusCode)
	}
	m := served{h: h, url: srv.URL}.metrics(t)
	for _, want := range []string{`edgelimit_edge_upstream_pauses_total{isolate="0"} 1`, `edgelimit_edge_upstream_ignored_total{isolate="0"} 2`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// The host reads time through its Clock: a pause of 30 s ends when the
// injected clock passes it, not the wall clock.
func TestPauseEndsOnTheHostsClock(t *testing.T) {
	clk := clock.NewManual(1_763_700_000e9)
	h, err := New(context.Background(), Options{Config: upstreamConfig(wire.Approximate), Isolates: 2, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	q := url.Values{"limiter": {"llm"}, "key": {"k"}}
	if code, o := observe(t, srv, `{"limiter":"llm","key":"k","status":429,"headers":{"Retry-After":"30"}}`); code != 200 || o.PausedNS != 30e9 {
		t.Fatalf("observe: %d %+v", code, o)
	}
	for i := 0; i < 2; i++ { // both isolates of the host
		if resp, d := get(t, srv, q); resp.StatusCode != 429 || d.RetryAfter != 30e9 {
			t.Fatalf("paused: %d %+v, want 429 with exactly 30 s to go on the manual clock", resp.StatusCode, d)
		}
	}
	clk.Advance(29e9)
	if resp, d := get(t, srv, q); resp.StatusCode != 429 || d.RetryAfter != 1e9 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("29 s later: %d %+v", resp.StatusCode, d)
	}
	clk.Advance(1e9)
	for i := 0; i < 2; i++ {
		if resp, _ := get(t, srv, q); resp.StatusCode != 200 {
			t.Fatalf("30 s later: %d, want 200", resp.StatusCode)
		}
	}
}

// An upstream's 429 with other headers than the rate-limit ones, many or
// long (a Content-Security-Policy of 1.1 KB, 64 tracing headers), pauses
// the key as the JavaScript package's observe() does: only the rate-limit
// headers count against the bounds. Before, the whole answer was refused
// (400 "header names and values are at most 1024 bytes") and nothing was
// paused. Rate-limit headers past the bounds are still refused.
func TestObserveReadsOnlyRateLimitHeaders(t *testing.T) {
	_, srv := observeHost(t)
	hdr := map[string]string{"Retry-After": "30", "Content-Security-Policy": strings.Repeat("a", 1100)}
	for i := 0; i < 64; i++ {
		hdr[fmt.Sprintf("X-Trace-%d", i)] = "t"
	}
	body, _ := json.Marshal(ObserveRequest{Limiter: "llm", Key: "k", Status: 429, Headers: hdr})
	if code, o := observe(t, srv, string(body)); code != 200 || o.PausedNS <= 0 {
		t.Fatalf("a 429 with long and many other headers: %d %+v, want 200 and a pause", code, o)
	}
	if resp, _ := get(t, srv, url.Values{"limiter": {"llm"}, "key": {"k"}}); resp.StatusCode != 429 {
		t.Fatalf("after the 429: %d, want 429 (paused)", resp.StatusCode)
	}
	body, _ = json.Marshal(ObserveRequest{Limiter: "llm", Key: "k2", Status: 429, Headers: map[string]string{"RateLimit-Policy": strings.Repeat("a", 1100)}})
	if code, _ := observe(t, srv, string(body)); code != 400 {
		t.Fatalf("a rate-limit header of 1.1 KB: %d, want 400", code)
	}
}

// observeHost starts a host of one isolate running upstreamConfig's
// limiters in approximate mode, without a coordinator, and its server;
// both are stopped at the end of t.
func observeHost(t *testing.T) (*Host, *httptest.Server) {
	t.Helper()
	h, err := New(context.Background(), Options{Config: upstreamConfig(wire.Approximate), Isolates: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	return h, srv
}
