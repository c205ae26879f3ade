package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A request held for a lease (SyncRetry) asks once. When it arrived while
// a batch was in flight, the reply to that batch does not answer it, and
// the host decides it again at once: held again, it must not ask a second
// time in the next batch (one request granted two units: the second
// unused, stranded in the window). A request refused later asks anew.
func TestHeldRequestAsksOnce(t *testing.T) {
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: 1e9, Mode: wire.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	t0 := int64(5e9)
	demandOf := func(batch []byte, key string) int64 {
		t.Helper()
		var b wire.Batch
		if err := b.UnmarshalMsg(batch); err != nil {
			t.Fatal(err)
		}
		for _, d := range b.Entries {
			if d.Key == key && d.Window == t0/1e9 {
				return d.Demand
			}
		}
		return 0
	}
	reply := func(at int64, views ...wire.View) {
		t.Helper()
		rp := wire.Reply{Version: wire.Version, Seq: c.seq, At: at, Entries: views}
		if err := c.SyncIn(rp.AppendMsg(nil), at); err != nil {
			t.Fatal(err)
		}
	}
	// A request for "o" is held; its batch goes out.
	if err := c.Decide(0, []byte("o"), 1, t0, &r); err != nil || !r.SyncRetry {
		t.Fatalf("o: %+v, %v; want SyncRetry", r, err)
	}
	if _, err := c.SyncOut(t0, nil); err != nil {
		t.Fatal(err)
	}
	// While it is in flight a request for "k" is held too.
	if err := c.Decide(0, []byte("k"), 1, t0+1e6, &r); err != nil || !r.SyncRetry {
		t.Fatalf("k: %+v, %v; want SyncRetry", r, err)
	}
	// The reply answers o; the host decides both again at once.
	now := t0 + 40e6
	reply(now, wire.View{Limiter: "s", Key: "o", Window: t0 / 1e9, Lease: 1, Isolates: 2})
	if err := c.Decide(0, []byte("o"), 1, now, &r); err != nil || !r.Allowed {
		t.Fatalf("o again: %+v, %v; want admitted", r, err)
	}
	if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil || !r.SyncRetry {
		t.Fatalf("k again: %+v, %v; want SyncRetry", r, err)
	}
	b, err := c.SyncOut(now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := demandOf(b, "k"); d != 1 {
		t.Fatalf("k's one request asks %d in the next batch, want 1", d)
	}
	// The reply answers k's ask (its ask was sent): admitted under the
	// lease, it counts as demand as always, and so does a new request
	// 300 ms later.
	now += 40e6
	reply(now, wire.View{Limiter: "s", Key: "k", Window: t0 / 1e9, Count: 1, Lease: 1, Isolates: 2})
	if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil || !r.Allowed {
		t.Fatalf("k under its lease: %+v, %v", r, err)
	}
	now += 300e6
	if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil || !r.SyncRetry {
		t.Fatalf("a new request for k: %+v, %v; want SyncRetry", r, err)
	}
	b, err = c.SyncOut(now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := demandOf(b, "k"); d != 2 {
		t.Fatalf("k's batch asks %d, want 2 (the admitted request and the new one)", d)
	}
}
