package host

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// An edge host that runs limiters its coordinator does not count for it
// (one the coordinator lacks, one its token is not granted) keeps
// counting the others: the coordinator takes their items out of each
// batch and applies the rest. Before, it refused the whole batch, which
// the isolate resent unchanged for ever: one request on such a limiter
// stopped every later count of the isolate from arriving (5 of 15
// counted), and its view went stale. The host says so once in its log.
func TestLimitersNotCountedWedgeNothing(t *testing.T) {
	coordCfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 1000, Period: int64(time.Hour)},
		{Name: "tb", Algorithm: wire.TokenBucket, Limit: 1000, Period: int64(time.Hour), Burst: 1000}}}
	edgeCfg := coordCfg
	edgeCfg.Limiters = append(append([]wire.LimiterConfig(nil), coordCfg.Limiters...),
		wire.LimiterConfig{Name: "extra", Algorithm: wire.FixedWindow, Limit: 1000, Period: int64(time.Hour)})
	k := startCoordOpts(t, "127.0.0.1:0", coordinator.Options{Dir: t.TempDir(), Config: coordCfg, GCInterval: -1,
		Grants: []coordinator.Grant{{Token: "tokA", Roles: coordinator.RoleEdge, Limiters: []string{"api"}}}})
	defer k.stop(t)
	c := k.c
	var logs lockedBuffer
	e := serve(t, Options{Config: edgeCfg, Isolates: 1, Coordinator: "http://" + k.addr, Token: "tokA",
		Sync: syncloop.Options{Interval: 50 * time.Millisecond}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	api := url.Values{"limiter": {"api"}, "key": {"k"}}
	for i := 0; i < 5; i++ {
		e.decide(t, api)
	}
	e.decide(t, url.Values{"limiter": {"tb"}, "key": {"k"}})    // not granted to tokA
	e.decide(t, url.Values{"limiter": {"extra"}, "key": {"k"}}) // not in the coordinator's configuration
	for i := 0; i < 10; i++ {
		e.decide(t, api)
	}
	deadline := time.Now().Add(5 * time.Second)
	var got int64
	for time.Now().Before(deadline) {
		ks, err := c.KeyState(context.Background(), "api", "k")
		if err != nil {
			t.Fatal(err)
		}
		if got = ks.Count; got == 15 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != 15 {
		t.Fatalf("the coordinator counted %d of the 15 api requests admitted", got)
	}
	if ks, _ := c.KeyState(context.Background(), "tb", "k"); ks != nil && ks.TAT > 0 {
		t.Errorf("tb charged by a token not granted it: %+v", ks)
	}
	if n := e.h.SyncErrors(); n != 0 {
		t.Errorf("%d syncs failed", n)
	}
	// The host logs when it reads the reply, which can come after the
	// coordinator's count is read above.
	out := logs.String()
	for end := time.Now().Add(5 * time.Second); !strings.Contains(out, "does not count these limiters") && time.Now().Before(end); out = logs.String() {
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(out, "does not count these limiters"); n < 1 || !strings.Contains(out, "tb") || !strings.Contains(out, "extra") {
		t.Errorf("log: %d lines saying the coordinator does not count tb and extra:\n%s", n, out)
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A coordinator (or what answers in its place) that names another list of
// uncounted limiters with every reply fills neither the log nor the
// memory: 16 lists are said, each cut to 512 bytes, then once that no
// more are (before, 556 lines of 60 KB in 30 s, and every list kept).
func TestUncountedListsBounded(t *testing.T) {
	var logs lockedBuffer
	h, err := New(context.Background(), Options{Config: wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 10, Period: int64(time.Second)}}},
		Isolates: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i := range 40 {
		for range 2 { // each list said once
			h.uncounted(strconv.Itoa(i) + strings.Repeat("l", 60_000))
		}
		h.uncounted("short" + strconv.Itoa(i%3))
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 17 {
		t.Fatalf("%d log lines, want 16 lists and one saying no more are", len(lines))
	}
	for _, l := range lines {
		if len(l) > 1024 {
			t.Fatalf("a log line of %d bytes", len(l))
		}
	}
	if !strings.Contains(lines[16], "no more are said") || len(h.told) != 17 {
		t.Fatalf("last line %q, %d lists kept", lines[16], len(h.told))
	}
}
