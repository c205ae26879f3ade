package coordinator_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestHugeCostWedgesNoIsolate: a client with a token of its own reports a
// cost of 2^40 on key k of a fixed window (100/h) and of a token bucket
// (10/s), and on a key of the window the edge never names (told to it as
// a full-window notice), as one valid batch. A real edge host (the module under wazero)
// of another token goes on deciding k and another key: each of its
// replies naming k must be one the module takes (a count or TAT past
// what its checks allow would make it refuse every reply naming k, so
// that its batches, and the cost it admits on every other key, never get
// through), so every request it admits on the other key is counted.
func TestHugeCostWedgesNoIsolate(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 100, Period: int64(time.Hour), Mode: wire.Approximate},
		{Name: "tb", Algorithm: wire.TokenBucket, Limit: 10, Period: int64(time.Second), Burst: 20, Mode: wire.Approximate},
		{Name: "other", Algorithm: wire.FixedWindow, Limit: 1_000_000, Period: int64(time.Hour), Mode: wire.Approximate}}}
	c, err := coordinator.Open(coordinator.Options{InMemory: true, Config: cfg, Tokens: []string{"edge", "evil"}})
	if err != nil {
		t.Fatal(err)
	}
	curl := serveLoopback(t, c)
	_, hurl := serveEdge(t, host.Options{Config: cfg, Isolates: 2, Coordinator: curl,
		Token: "edge", IDPrefix: "e", Sync: syncloop.Options{Interval: 20 * time.Millisecond, StaleAfter: time.Second}})
	admitted := 0
	decide := func(limiter string, n int) {
		for range n {
			resp, err := http.Get(hurl + "/v1/decide?limiter=" + limiter + "&key=k")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if limiter == "other" && resp.StatusCode == 200 {
				admitted++
			}
		}
	}
	count := func() int64 {
		ks, err := c.KeyState(context.Background(), "other", "k")
		if err != nil {
			t.Fatal(err)
		}
		return ks.Count
	}
	waitCount := func(what string) {
		for deadline := time.Now().Add(5 * time.Second); count() != int64(admitted); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: coordinator count of other/k %d, want the %d the edge admitted", what, count(), admitted)
			}
		}
	}
	for range 3 {
		decide("api", 2)
		decide("tb", 2)
		decide("other", 4)
	}
	waitCount("before")
	now := time.Now().UnixNano()
	evil := &wire.Batch{Version: wire.Version, Isolate: "x", Seq: 1, At: now, Entries: []wire.Delta{
		{Limiter: "api", Key: "k", Window: now / int64(time.Hour), Delta: 1 << 40},
		{Limiter: "tb", Key: "k", Delta: 1 << 40}}}
	if st := postBatch(t, curl, "evil", evil); st != 200 {
		t.Fatalf("the 2^40 batch: %d", st)
	}
	for i := range 10 {
		// Each round a key the edge never names fills with 2^50: the
		// edge's next reply carries it as a full-window notice, which was
		// not bounded, and every such reply was refused (20 sync errors
		// here; at 20 a second against a 100 ms sync, no sync of the
		// edge's got through while it lasted).
		now := time.Now().UnixNano()
		fresh := &wire.Batch{Version: wire.Version, Isolate: "x", Seq: int64(2 + i), At: now, Entries: []wire.Delta{
			{Limiter: "other", Key: fmt.Sprintf("fresh%d", i), Window: now / int64(time.Hour), Delta: wire.MaxLimit}}}
		if st := postBatch(t, curl, "evil", fresh); st != 200 {
			t.Fatalf("a 2^50 batch on a fresh key: %d", st)
		}
		decide("api", 2)
		decide("tb", 2)
		decide("other", 4)
		time.Sleep(30 * time.Millisecond)
	}
	if n := syncErrors(t, hurl); n != 0 {
		t.Errorf("%d of the edge's syncs failed: replies it refused", n)
	}
	waitCount("after the 2^40 batch")
}

// syncErrors reads edgelimit_edge_sync_errors_total from the edge host at hurl.
func syncErrors(t *testing.T, hurl string) int {
	t.Helper()
	resp, err := http.Get(hurl + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "edgelimit_edge_sync_errors_total "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("sync errors %q: %v", l, err)
			}
			return n
		}
	}
	t.Fatal("no edgelimit_edge_sync_errors_total in the edge's metrics")
	return 0
}
