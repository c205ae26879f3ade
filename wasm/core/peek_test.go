package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A peek on a key the isolate does not use asks the coordinator first
// (SyncRetry, and a batch naming the key goes out at once), then answers
// the global estimate from the reply's view; a view older than two sync
// intervals is asked again. Limiters that do not coordinate (approximate
// without read-through) answer at once, as before.
func TestPeekOnAColdKeyAsksFirst(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, IsolateID: "i", SyncInterval: 100e6, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: 60e9, Mode: wire.Auto},
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 100, Period: 60e9, Mode: wire.Approximate}}}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	now := int64(120e9) // window 2 of 60 s
	if err := c.Decide(0, []byte("k"), 0, now, &r); err != nil || !r.Allowed || !r.SyncRetry || !r.SyncWanted {
		t.Fatalf("peek on a key never seen: %+v, %v; want allowed, SyncRetry, SyncWanted", r, err)
	}
	out, err := c.SyncOut(now, nil)
	if err != nil || len(out) == 0 {
		t.Fatalf("no batch after a cold peek: %d bytes, %v", len(out), err)
	}
	named := false
	for _, d := range batchOf(t, out).Entries {
		named = named || d.Limiter == "s" && d.Key == "k" && d.Delta == 0 && d.Demand == 0
	}
	if !named {
		t.Fatalf("the batch does not name the peeked key: %+v", batchOf(t, out).Entries)
	}
	rp := wire.Reply{Version: wire.Version, Seq: c.seq, At: now + 20e6, Entries: []wire.View{
		{Limiter: "s", Key: "k", Window: 2, Count: 30, Lease: 0, Isolates: 3}}}
	if err := c.SyncIn(rp.AppendMsg(nil), now+40e6); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(0, []byte("k"), 0, now+50e6, &r); err != nil || !r.Allowed || r.SyncRetry || r.Remaining != 70 {
		t.Fatalf("peek after the reply: %+v, %v; want remaining 70 at once", r, err)
	}
	if err := c.Decide(0, []byte("k"), 0, now+300e6, &r); err != nil || !r.SyncRetry {
		t.Fatalf("peek on a view 280 ms old: %+v, %v; want SyncRetry", r, err)
	}
	if err := c.Decide(1, []byte("k"), 0, now, &r); err != nil || !r.Allowed || r.SyncRetry || !r.SyncWanted {
		t.Fatalf("approximate peek on a key never seen: %+v, %v; want allowed at once, SyncWanted", r, err)
	}
	out, err = c.SyncOut(now+60e6, nil)
	if err != nil || len(out) == 0 {
		t.Fatalf("no batch after an approximate cold peek: %d bytes, %v", len(out), err)
	}
	named = false
	for _, d := range batchOf(t, out).Entries {
		named = named || d.Limiter == "a" && d.Key == "k" && d.Delta == 0 && d.Demand == 0
	}
	if !named {
		t.Fatalf("the batch does not name the approximate key peeked: %+v", batchOf(t, out).Entries)
	}
	rp = wire.Reply{Version: wire.Version, Seq: c.seq, At: now + 80e6, Entries: []wire.View{
		{Limiter: "a", Key: "k", Window: 2, Count: 65, Isolates: 3}}}
	if err := c.SyncIn(rp.AppendMsg(nil), now+100e6); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(1, []byte("k"), 0, now+110e6, &r); err != nil || !r.Allowed || r.SyncWanted || r.Remaining > 35 {
		t.Fatalf("approximate peek after the reply: %+v, %v; want remaining at most 35, no sync wanted", r, err)
	}
	alone, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Standalone: true, Limiters: cfg.Limiters})
	if err != nil {
		t.Fatal(err)
	}
	if err := alone.Decide(0, []byte("k"), 0, now, &r); err != nil || r.SyncRetry {
		t.Fatalf("standalone peek: %+v, %v; want no SyncRetry (nothing to ask)", r, err)
	}
}
