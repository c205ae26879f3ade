package syncloop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// sizing records the size of each reply its transport reads.
type sizing struct {
	tr    syncloop.Transport
	sizes []int
}

func (s *sizing) Sync(ctx context.Context, batch, dst []byte) ([]byte, error) {
	out, err := s.tr.Sync(ctx, batch, dst)
	if err == nil {
		s.sizes = append(s.sizes, len(out)-len(dst))
	}
	return out, err
}

// TestLargestReplyRead: an isolate that admitted wire.MaxBatchEntries keys
// of wire.MaxKeyLen bytes on a limiter with a name of wire.MaxNameLen
// bytes, paused fleet-wide, cuts a batch of all but one of them, which a
// real coordinator (loopback HTTP, Pebble) answers with a view and an
// upstream view of each key: 5.6 MB, more than 4 MiB,
// which the transport refused to read ("reply larger than 4194304
// bytes"), so the isolate sent the same batch again at every sync, never
// acknowledged. The transport reads up to wire.MaxReplyBytes, the largest
// reply the wire allows, and the isolate applies it: its keys are paused.
func TestLargestReplyRead(t *testing.T) {
	ctx := context.Background()
	name := strings.Repeat("n", wire.MaxNameLen)
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: name, Algorithm: wire.TokenBucket, Limit: 1000, Period: int64(time.Second), Mode: wire.Approximate}}}
	clock := &fixedClock{}
	clock.t.Store(int64(100 * time.Hour))
	srv := startServer(t, t.TempDir(), cfg, "", clock)
	defer srv.stop(t)
	if err := srv.c.PauseFleet(ctx, "test", name, "", time.Hour, "the largest reply"); err != nil {
		t.Fatal(err)
	}
	rt, err := isolate.NewRuntime(ctx, isolate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	c := cfg
	c.IsolateID = "big"
	iso, err := rt.NewIsolate(ctx, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) string { return fmt.Sprintf("%0*d", wire.MaxKeyLen, i) }
	for i := 0; i < wire.MaxBatchEntries; i++ {
		if d, err := iso.Decide(ctx, 0, key(i), 1, clock.tick()); err != nil || !d.Allowed {
			t.Fatalf("key %d: %+v %v", i, d, err)
		}
	}
	tr := &sizing{tr: &syncloop.HTTPTransport{URL: srv.url}}
	loop, err := syncloop.NewLoop(syncloop.Options{}, clock, tr, iso, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.SyncOnce(ctx); err != nil {
		t.Fatalf("the sync of %d keys of %d bytes on a paused limiter: %v", wire.MaxBatchEntries, wire.MaxKeyLen, err)
	}
	if len(tr.sizes) == 0 || tr.sizes[0] <= 4<<20 || tr.sizes[0] > wire.MaxReplyBytes {
		t.Fatalf("reply sizes %v, want the first above 4 MiB (what this test is about) and at most wire.MaxReplyBytes (%d)", tr.sizes, wire.MaxReplyBytes)
	}
	t.Logf("reply: %d bytes (wire.MaxReplyBytes %d)", tr.sizes[0], wire.MaxReplyBytes)
	// The batch held all but one of the keys (the module's cut); the
	// next sync brings the last.
	if err := loop.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, wire.MaxBatchEntries - 1} {
		if d, err := iso.Decide(ctx, 0, key(i), 1, clock.tick()); err != nil || d.Allowed {
			t.Fatalf("key %d after the reply: %+v %v, want denied (the fleet pause the reply carried)", i, d, err)
		}
	}
	if st, err := iso.Stats(ctx); err != nil || st.Errors != 0 {
		t.Fatalf("module stats %+v %v, want no errors", st, err)
	}
}
