package syncloop_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestIsolateDeltasCountWhateverOthersSend: real wasm isolates, their sync
// loops and a real coordinator (Pebble on disk, two tokens) over loopback
// HTTP. The holder of the second token sends a batch under the first
// edge's isolate id with seq 2^62: the edge's next batches still count.
// Then the edge's isolate restarts with the same id (a fresh module: seq
// back to 1): the coordinator refuses seq 1 (409 seq_stale), the loop makes
// the module start a new incarnation and resends, and the restarted
// isolate's deltas count from its first batch.
func TestIsolateDeltasCountWhateverOthersSend(t *testing.T) {
	ctx := context.Background()
	cfg := wire.Config{Version: wire.Version, IsolateID: "edge-0", Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 1000, Period: int64(time.Hour)}}}
	clock := &fixedClock{}
	clock.t.Store(int64(100 * time.Hour))
	srv := startServer(t, t.TempDir(), cfg, "token-a,token-b", clock)
	defer srv.stop(t)
	rt, err := isolate.NewRuntime(ctx, isolate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	tr := &syncloop.HTTPTransport{URL: srv.url, Token: "token-a"}
	admitted := int64(0)
	// run decides n requests on iso and syncs them through a loop.
	run := func(iso *isolate.Isolate, n int) {
		t.Helper()
		for j := 0; j < n; j++ {
			d, err := iso.Decide(ctx, 0, "k", 1, clock.tick())
			if err != nil || !d.Allowed {
				t.Fatalf("decide: %+v, %v", d, err)
			}
			admitted++
		}
		loop, err := syncloop.NewLoop(syncloop.Options{}, clock, tr, iso, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := loop.SyncOnce(ctx); err != nil {
			t.Fatalf("sync of %s: %v", iso.ID(), err)
		}
		ks, err := srv.c.KeyState(ctx, "api", "k")
		if err != nil || ks.Count != admitted {
			t.Fatalf("after a sync of %s: count %+v, %v; want %d", iso.ID(), ks, err, admitted)
		}
	}
	iso, err := rt.NewIsolate(ctx, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	run(iso, 3)

	// Another token holder tries to take edge-0 over.
	forged := &wire.Batch{Version: wire.Version, Isolate: "edge-0", Seq: 1 << 62, At: clock.Now(),
		Entries: []wire.Delta{{Limiter: "api", Key: "k", Window: clock.Now() / int64(time.Hour)}}}
	req, _ := http.NewRequest("POST", srv.url+"/v1/sync", bytes.NewReader(forged.AppendMsg(nil)))
	req.Header.Set("Content-Type", "application/msgpack")
	req.Header.Set("Authorization", "Bearer token-b")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("forged seq 2^62: %d, want 409", resp.StatusCode)
	}
	run(iso, 2)
	run(iso, 2)
	if iso.ID() != "edge-0" {
		t.Fatalf("the first life was reincarnated as %q", iso.ID())
	}

	// The isolate restarts with the same id: its first batch counts.
	iso2, err := rt.NewIsolate(ctx, cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	run(iso2, 4)
	if !strings.HasPrefix(iso2.ID(), "edge-0~") {
		t.Fatalf("restarted isolate syncs as %q, want a new incarnation of edge-0", iso2.ID())
	}
	run(iso2, 1)
}

// TestHTTPTransportSequenceError: the coordinator's 409 for a sequence
// anomaly is an error matching ErrSequence (and ErrRefused), what the loop
// acts on; nothing was applied, so seq 1 is still the next.
func TestHTTPTransportSequenceError(t *testing.T) {
	ctx := context.Background()
	cfg := wire.Config{Version: wire.Version, IsolateID: "edge-0", Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 1000, Period: int64(time.Hour)}}}
	clock := &fixedClock{}
	clock.t.Store(int64(100 * time.Hour))
	srv := startServer(t, t.TempDir(), cfg, "", clock)
	defer srv.stop(t)
	tr := &syncloop.HTTPTransport{URL: srv.url}
	b := &wire.Batch{Version: wire.Version, Isolate: "edge-0", Seq: 5, At: clock.Now()}
	_, err := tr.Sync(ctx, b.AppendMsg(nil), nil)
	if !errors.Is(err, syncloop.ErrSequence) || !errors.Is(err, syncloop.ErrRefused) {
		t.Fatalf("seq 5 of an unknown isolate: %v", err)
	}
	b.Seq = 1
	if _, err := tr.Sync(ctx, b.AppendMsg(nil), nil); err != nil {
		t.Fatalf("seq 1: %v", err)
	}
}
