package syncloop_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// server runs a real coordinator on Pebble in dir, over HTTP on loopback,
// with the comma-separated bearer tokens in startServer's token (none when
// empty).
type server struct {
	c      *coordinator.Coordinator
	url    string
	cancel context.CancelFunc
	done   chan error
}

func startServer(t *testing.T, dir string, cfg wire.Config, token string, clock *fixedClock) *server {
	t.Helper()
	opts := coordinator.Options{Dir: dir, Config: cfg, GCInterval: -1, Clock: clock}
	if token != "" {
		opts.Tokens = strings.Split(token, ",") // several: "a,b"
	}
	c, err := coordinator.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{c: c, url: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- c.Serve(ctx, ln) }()
	return s
}

func (s *server) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	<-s.done
	if err := s.c.Close(); err != nil {
		t.Fatal(err)
	}
}

// fixedClock is a Clock that only moves when told (the loop is driven with
// SyncOnce, so After is never waited on); the coordinator reads it too.
type fixedClock struct{ t atomic.Int64 }

func (c *fixedClock) Now() int64                  { return c.t.Load() }
func (c *fixedClock) tick() int64                 { return c.t.Add(int64(time.Millisecond)) }
func (c *fixedClock) After(int64) <-chan struct{} { return make(chan struct{}) }

// TestEndToEndOverHTTP runs the whole data flow with real parts: wasm
// isolates decide, their sync loops post batches over loopback HTTP to the
// coordinator (Pebble on disk), the replies update the isolates' views. It
// checks that every admitted request is counted exactly once, that the
// isolates stop admitting near the limit, and that a coordinator that is
// down loses nothing: the outstanding batch is retried, after a restart on
// the same directory, and applied once.
func TestEndToEndOverHTTP(t *testing.T) {
	ctx := context.Background()
	const limit = 200
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: limit, Period: int64(time.Hour)}}}
	dir := t.TempDir()
	clock := &fixedClock{}
	clock.t.Store(int64(100 * time.Hour))
	srv := startServer(t, dir, cfg, "s3cret", clock)

	rt, err := isolate.NewRuntime(ctx, isolate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	tr := &syncloop.HTTPTransport{URL: srv.url, Token: "s3cret"}
	type edge struct {
		iso  *isolate.Isolate
		loop *syncloop.Loop
	}
	var edges []edge
	for i := 0; i < 4; i++ {
		c := cfg
		c.IsolateID = "e2e-" + strconv.Itoa(i)
		iso, err := rt.NewIsolate(ctx, c, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		loop, err := syncloop.NewLoop(syncloop.Options{}, clock, tr, iso, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		edges = append(edges, edge{iso, loop})
	}

	// A wrong token is refused and nothing is lost: the same batch goes
	// again with the right one.
	bad := &syncloop.HTTPTransport{URL: srv.url, Token: "wrong"}
	if _, err := edges[0].iso.Decide(ctx, 0, "k", 1, clock.Now()); err != nil {
		t.Fatal(err)
	}
	badLoop, _ := syncloop.NewLoop(syncloop.Options{}, clock, bad, edges[0].iso, 9)
	if err := badLoop.SyncOnce(ctx); !errors.Is(err, syncloop.ErrRefused) {
		t.Fatalf("wrong token: %v", err)
	}
	admitted := int64(1)

	// Rounds: each isolate decides a few requests, then syncs over HTTP.
	for round := 0; round < 40; round++ {
		for _, e := range edges {
			for j := 0; j < 3; j++ {
				d, err := e.iso.Decide(ctx, 0, "k", 1, clock.tick())
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
			if round == 10 && e.iso == edges[0].iso { // still admitting: it has a batch to send
				// The coordinator goes down mid-run: the sync fails,
				// the batch stays outstanding in the module.
				srv.stop(t)
				if err := e.loop.SyncOnce(ctx); err == nil {
					t.Fatal("sync with the coordinator down succeeded")
				}
				srv = startServer(t, dir, cfg, "s3cret", clock)
				tr.URL = srv.url
			}
			if err := e.loop.SyncOnce(ctx); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	for _, e := range edges { // flush what the last round admitted
		if err := e.loop.SyncOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	defer srv.stop(t)
	ks, err := srv.c.KeyState(ctx, "api", "k")
	if err != nil {
		t.Fatal(err)
	}
	if ks.Count != admitted {
		t.Fatalf("coordinator counted %d, isolates admitted %d: not exactly once", ks.Count, admitted)
	}
	// 4 isolates x 3 requests between syncs: the overrun is bounded by
	// what the others admit between two syncs.
	if admitted < limit || admitted > limit+4*3 {
		t.Fatalf("admitted %d with limit %d", admitted, limit)
	}
	for _, e := range edges {
		d, err := e.iso.Decide(ctx, 0, "k", 0, clock.Now())
		if err != nil || d.Remaining != 0 {
			t.Fatalf("after the limit: %+v, %v", d, err)
		}
	}
}
