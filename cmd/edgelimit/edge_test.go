package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the command's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestEdgeFailFlagsRejected(t *testing.T) {
	for _, args := range [][]string{
		{"edge", "--fail-policy", "half-open"},
		{"edge", "--stale-after", "-1s"},
		{"edge", "--retry-wait", "20s"}, // longer than the write timeout
		// Before, 0 and -3 ran the default 4, and 100000000 built
		// isolates until memory ran out, deaf to SIGTERM.
		{"edge", "--isolates", "0"},
		{"edge", "--isolates", "-3"},
		{"edge", "--isolates", "100000000"},
	} {
		if _, _, err := run(t, args...); err == nil || !strings.HasPrefix(err.Error(), "edge: ") {
			t.Errorf("%v: err %v", args, err)
		}
	}
}

// TestEdgeCommandFailsClosed runs `edgelimit edge` with a coordinator that
// does not answer, --fail-policy closed and a short --stale-after: after
// one admitted request its isolate goes stale, /healthz answers 503 and
// the limiter (no fail_policy in the file) denies by the flag's policy.
func TestEdgeCommandFailsClosed(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "limits.json")
	if err := os.WriteFile(cfg, []byte(`{"limiters": [{"name": "llm", "algorithm": "fixed_window", "limit": 6, "period": "1h", "mode": "approximate"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, []string{"edge", "--config", cfg, "--listen", "127.0.0.1:0", "--coordinator", "http://" + dead,
			"--isolates", "1", "--sync", "20ms", "--stale-after", "150ms", "--sync-timeout", "100ms", "--fail-policy", "closed"},
			&bytes.Buffer{}, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("edge: %v", err)
		}
	}()
	re := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			base = "http://" + m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no listen address in %q", stderr.String())
		}
	}
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := get("/v1/decide?limiter=llm&key=a"); r.StatusCode != 200 {
		t.Fatalf("first request: %d", r.StatusCode)
	}
	// /healthz is 503 at once (the probe of the coordinator fails); the
	// fail policy applies once the isolate is stale.
	stale := func() bool {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var hl struct{ Status string }
		json.NewDecoder(resp.Body).Decode(&hl)
		return resp.StatusCode == 503 && hl.Status == "stale"
	}
	for deadline := time.Now().Add(10 * time.Second); !stale(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("/healthz not 503 stale 10s after the coordinator stopped answering")
		}
	}
	if r := get("/v1/decide?limiter=llm&key=a"); r.StatusCode != 429 || r.Header.Get("EdgeLimit-Fail-Policy") != "closed" {
		t.Fatalf("stale, --fail-policy closed: %d %v", r.StatusCode, r.Header)
	}
	logs := stderr.String()
	if !strings.Contains(logs, "fail_policy=closed stale_after=150ms") {
		t.Errorf("start line: %q", logs)
	}
	// The outage is logged once (level warn), not once per attempt.
	if n := strings.Count(logs, "level=WARN msg=\"host: sync failing"); n != 1 {
		t.Errorf("%d sync-failing warnings, want 1: %q", n, logs)
	}
}
