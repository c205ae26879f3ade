package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestLeaseMiss: strict mode flags a denial that a sync could turn around
// (no lease, or too small a lease, while the global count has room), and
// not a denial the global count itself decides.
func TestLeaseMiss(t *testing.T) {
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 10, Period: 1e9, Mode: wire.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	key := []byte("k")
	if err := c.Decide(0, key, 1, 5e9, &r); err != nil || r.Allowed || !r.LeaseMiss || !r.SyncWanted {
		t.Fatalf("no lease yet: %+v, %v; want a lease miss that asks for a sync", r, err)
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
		if err := c.Decide(0, key, 1, 5e9, &r); err != nil || !r.Allowed || r.LeaseMiss {
			t.Fatalf("within the lease: %+v, %v", r, err)
		}
	}
	if err := c.Decide(0, key, 1, 5e9, &r); err != nil || r.Allowed || !r.LeaseMiss {
		t.Fatalf("lease used up, global count has room: %+v, %v", r, err)
	}
	// The global count is full: a lease would not help.
	c.Decide(0, key, 0, 5e9, &r) // nothing pending besides the 2 admitted
	reply(10, 0)
	if err := c.Decide(0, key, 1, 5e9, &r); err != nil || r.Allowed || r.LeaseMiss {
		t.Fatalf("global count at the limit: %+v, %v; want a plain denial", r, err)
	}
}
