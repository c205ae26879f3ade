package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestSyncRetry: strict mode flags a denial that a sync could turn around
// (no lease, or too small a lease, while the global count has room), and
// not a denial the global count itself decides.
func TestSyncRetry(t *testing.T) {
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 10, Period: 1e9, Mode: wire.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	key := []byte("k")
	if err := c.Decide(0, key, 1, 5e9, &r); err != nil || r.Allowed || !r.SyncRetry || !r.SyncWanted {
		t.Fatalf("no lease yet: %+v, %v; want a sync retry that asks for a sync", r, err)
	}
	reply := func(count, lease int64) {
		t.Helper()
		if _, err := c.SyncOut(5e9, nil); err != nil {
			t.Fatal(err)
		}
		rp := wire.Reply{Version: wire.Version, Seq: c.seq, At: 5e9, Entries: []wire.View{
			{Limiter: "s", Key: "k", Window: 5, Count: count, Lease: lease, Isolates: 2}}}
		if err := c.SyncIn(rp.AppendMsg(nil), 5e9); err != nil {
			t.Fatal(err)
		}
	}
	reply(0, 2)
	for i := 0; i < 2; i++ {
		if err := c.Decide(0, key, 1, 5e9, &r); err != nil || !r.Allowed || r.SyncRetry {
			t.Fatalf("within the lease: %+v, %v", r, err)
		}
	}
	if err := c.Decide(0, key, 1, 5e9, &r); err != nil || r.Allowed || !r.SyncRetry {
		t.Fatalf("lease used up, global count has room: %+v, %v", r, err)
	}
	// The global count is full: a lease would not help.
	c.Decide(0, key, 0, 5e9, &r) // nothing pending besides the 2 admitted
	reply(10, 0)
	if err := c.Decide(0, key, 1, 5e9, &r); err != nil || r.Allowed || r.SyncRetry {
		t.Fatalf("global count at the limit: %+v, %v; want a plain denial", r, err)
	}
}

// TestReadThroughColdKey: with ReadThrough, an approximate decision on a
// key without a fresh view is denied with SyncRetry (and consumes nothing);
// after a sync brings the view it is decided from the view; without
// ReadThrough the same decision is admitted at once.
func TestReadThroughColdKey(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "rt", Algorithm: wire.FixedWindow, Limit: 5, Period: 1e9, ReadThrough: true},
		{Name: "plain", Algorithm: wire.FixedWindow, Limit: 5, Period: 1e9}}}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	key := []byte("k")
	if err := c.Decide(1, key, 1, 3e9, &r); err != nil || !r.Allowed || r.SyncRetry {
		t.Fatalf("without read-through: %+v, %v", r, err)
	}
	if err := c.Decide(0, key, 1, 3e9, &r); err != nil || r.Allowed || !r.SyncRetry || !r.SyncWanted {
		t.Fatalf("cold key: %+v, %v; want a denial asking for a sync and a retry", r, err)
	}
	if _, err := c.SyncOut(3e9, nil); err != nil {
		t.Fatal(err)
	}
	rp := wire.Reply{Version: wire.Version, Seq: c.seq, At: 3e9 + 1e6, Entries: []wire.View{
		{Limiter: "rt", Key: "k", Window: 3, Count: 4, Lease: -1, Isolates: 8},
		{Limiter: "plain", Key: "k", Window: 3, Count: 1, Lease: -1, Isolates: 8}}}
	if err := c.SyncIn(rp.AppendMsg(nil), 3e9+2e6); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(0, key, 1, 3e9+2e6, &r); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("after the sync (global 4 of 5): %+v, %v", r, err)
	}
	if err := c.Decide(0, key, 1, 3e9+2e6, &r); err != nil || r.Allowed || r.SyncRetry {
		t.Fatalf("window full by the view: %+v, %v; want a plain denial", r, err)
	}
}
