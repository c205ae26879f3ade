package syncloop_test

import (
	"context"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A real wasm isolate, its loop and a real coordinator whose clock the
// test sets (Pebble on disk, loopback HTTP), windows of 10 s:
//   - the isolate's own clock runs 30 s ahead and it admits 4 requests
//     before any reading of the coordinator's time: its loop's first
//     attempt probes the coordinator first (syncloop.Reader), the module
//     moves the 4 units to the coordinator's window when told the step, and
//     the first batch is applied (before, it was refused 400 clock_skew);
//   - the isolate's clock then jumps 30 s forward: the next batch names
//     windows 3 ahead and is refused (ErrClockSkew); the loop takes it
//     back (syncloop.Recaller) and cuts it again at once, in the same
//     attempt, which the coordinator applies.
//
// Both times every unit admitted is counted in the coordinator's current
// window after one SyncOnce. (A coordinator whose own clock steps back
// keeps its keys' records in the windows they reached; that is not this
// test's.)
func TestLoopReadsTimeFirstAndRecallsASkewedBatch(t *testing.T) {
	ctx := context.Background()
	const period = int64(10 * time.Second)
	cfg := wire.Config{Version: wire.Version, IsolateID: "edge-0", Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 1000, Period: period}}}
	coordClock := &fixedClock{}
	coordClock.t.Store(100_000*period + int64(3*time.Second))
	srv := startServer(t, t.TempDir(), cfg, "", coordClock)
	defer srv.stop(t)
	own := &fixedClock{} // the isolate's own clock, 30 s ahead
	own.t.Store(coordClock.Now() + int64(30*time.Second))
	offset := &clock.Offset{Base: own}
	rt, err := isolate.NewRuntime(ctx, isolate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	iso, err := rt.NewIsolate(ctx, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	iso.FollowOffset(offset.Offset)
	tr := &syncloop.HTTPTransport{URL: srv.url, ID: cfg.IsolateID, Time: offset}
	loop, err := syncloop.NewLoop(syncloop.Options{}, offset, tr, iso, 1)
	if err != nil {
		t.Fatal(err)
	}
	admitted := int64(0)
	decide := func(n int) {
		t.Helper()
		for j := 0; j < n; j++ {
			own.tick()
			coordClock.tick()
			if d, err := iso.Decide(ctx, 0, "k", 1, offset.Now()); err != nil || !d.Allowed {
				t.Fatalf("decide: %+v, %v", d, err)
			}
			admitted++
		}
	}
	counted := func(what string) {
		t.Helper()
		if err := loop.SyncOnce(ctx); err != nil {
			t.Fatalf("%s: one attempt: %v", what, err)
		}
		ks, err := srv.c.KeyState(ctx, "a", "k")
		if err != nil || ks.Count != admitted {
			t.Fatalf("%s: the coordinator counts %+v (%v) in its window, want %d", what, ks, err, admitted)
		}
	}

	decide(4)
	counted("before the first reading, 30 s ahead")
	if off := offset.Offset(); off > int64(-29*time.Second) || off < int64(-31*time.Second) {
		t.Fatalf("offset after the first attempt: %v, want about -30s", time.Duration(off))
	}

	// The isolate's own clock is set 30 s forward: it admits on the
	// clock ahead again, and its batch is cut on it: refused, recalled and
	// cut again within the one attempt, in the coordinator's window.
	own.t.Add(int64(30 * time.Second))
	decide(5)
	steps := offset.Steps()
	counted("after the isolate's clock jumped 30 s forward")
	if offset.Steps() != steps+1 {
		t.Errorf("the offset stepped %d times in the attempt, want once (the refusal's reading)", offset.Steps()-steps)
	}
}
