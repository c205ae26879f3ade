package host

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// served is a host answering on a loopback listener through Serve (the
// real server with its timeouts).
type served struct {
	h   *Host
	url string
}

// serve starts a host with opts on 127.0.0.1 and stops it at the end of t.
func serve(t *testing.T, opts Options) served {
	t.Helper()
	h, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		h.Close()
	})
	return served{h: h, url: "http://" + ln.Addr().String()}
}

// decide sends one decision request and returns the status, the decision
// and the response headers.
func (s served) decide(t *testing.T, q url.Values) (int, decisionJSON, http.Header) {
	t.Helper()
	resp, err := http.Get(s.url + "/v1/decide?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d decisionJSON
	json.NewDecoder(resp.Body).Decode(&d)
	return resp.StatusCode, d, resp.Header
}

// health reads /healthz.
func (s served) health(t *testing.T) (int, Health) {
	t.Helper()
	resp, err := http.Get(s.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var hl Health
	if err := json.NewDecoder(resp.Body).Decode(&hl); err != nil {
		t.Fatalf("healthz body: %v", err)
	}
	return resp.StatusCode, hl
}

// metrics reads /metrics.
func (s served) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// waitHealth polls /healthz until it answers status (at most 10 s).
func (s served) waitHealth(t *testing.T, status int) Health {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, hl := s.health(t)
		if code == status {
			return hl
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz still %d %+v after 10s, want %d", code, hl, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStatus polls /healthz until its status is status (at most 10 s).
func (s served) waitStatus(t *testing.T, status string) Health {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, hl := s.health(t)
		if hl.Status == status {
			return hl
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz still %+v after 10s, want status %q", hl, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAllStale polls /healthz until it answers 503 with every isolate
// stale (at most 10 s): isolates go stale one by one.
func (s served) waitAllStale(t *testing.T) Health {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, hl := s.health(t)
		all := code == http.StatusServiceUnavailable && hl.Status == "stale"
		for _, ih := range hl.Isolates {
			all = all && ih.Stale
		}
		if all {
			return hl
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz %d %+v after 10s, want 503 with every isolate stale", code, hl)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hasMetric reports whether the exposition holds the line "series value".
func hasMetric(text, series, value string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == series+" "+value {
			return true
		}
	}
	return false
}

// coord is a coordinator on disk served on a loopback address.
type coord struct {
	c      *coordinator.Coordinator
	addr   string
	cancel context.CancelFunc
	done   chan error
}

// startCoord opens a coordinator in dir and serves it on addr
// ("127.0.0.1:0" for any port).
func startCoord(t *testing.T, dir, addr string, cfg wire.Config, tokens []string) *coord {
	t.Helper()
	return startCoordOpts(t, addr, coordinator.Options{Dir: dir, Config: cfg, GCInterval: -1, Tokens: tokens})
}

// startCoordOpts opens a coordinator with opts and serves it on addr.
func startCoordOpts(t *testing.T, addr string, opts coordinator.Options) *coord {
	t.Helper()
	c, err := coordinator.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &coord{c: c, addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { k.done <- c.Serve(ctx, ln) }()
	return k
}

// stop shuts the coordinator down and closes its store.
func (k *coord) stop(t *testing.T) {
	t.Helper()
	if k.cancel == nil {
		return
	}
	k.cancel()
	<-k.done
	if err := k.c.Close(); err != nil {
		t.Errorf("coordinator close: %v", err)
	}
	k.cancel = nil
}

// count returns the coordinator's count of key in limiter (current window).
func (k *coord) count(t *testing.T, limiter, key string) int64 {
	t.Helper()
	ks, err := k.c.KeyState(context.Background(), limiter, key)
	if err != nil {
		t.Fatal(err)
	}
	return ks.Count
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// hangingAddr returns the address of a listener on loopback that accepts
// connections and never answers (a coordinator that hangs, a black hole),
// open until the test ends, and the count of connections it accepted.
func hangingAddr(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := new(atomic.Int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			held = append(held, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String(), accepted
}
