package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A lease that lapses here with units left in its window names its key in
// the next batch (an entry of cost 0), so that the coordinator gives the
// units back (coordinator/merge's TestLapsedLeaseComesBack) instead of
// keeping them reserved, as spent, to the window's end. The name is not
// urgent: it rides along with the next batch, here a heartbeat, and costs
// no sync of its own. A lease still alive at that batch is not named, nor
// is a key whose lapsed lease was answered.
func TestLapsedLeaseNamesItsKey(t *testing.T) {
	const P = 60e9
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Heartbeat: 10e9, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: P, Mode: wire.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := int64(1000*P + 1e9)
	w := t0 / P
	var r Result
	for _, k := range []string{"short", "long"} {
		if err := c.Decide(0, []byte(k), 1, t0, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%s: %+v, %v; want SyncRetry", k, r, err)
		}
	}
	if b, err := c.SyncOut(t0, nil); err != nil || len(b) == 0 {
		t.Fatalf("no batch for the asks: %v", err)
	}
	// Both granted 5 for the request held (which the host decides again)
	// and four ahead; short lives a second, long half a minute.
	rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0 + 20e6, Entries: []wire.View{
		{Limiter: "s", Key: "short", Window: w, Lease: 5, Isolates: 2, Life: 1e9},
		{Limiter: "s", Key: "long", Window: w, Lease: 5, Isolates: 2, Life: 30e9}}}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+40e6); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"short", "long"} {
		if err := c.Decide(0, []byte(k), 1, t0+40e6, &r); err != nil || !r.Allowed {
			t.Fatalf("%s on its lease: %+v, %v; want admitted", k, r, err)
		}
	}
	// The admissions ride along (a strict fixed window reports lazily);
	// short's lapse a second later is no reason to sync either.
	for _, at := range []int64{t0 + 500e6, t0 + 2e9} {
		if b, err := c.SyncOut(at, nil); err != nil || len(b) != 0 {
			t.Fatalf("a batch at %d ms: %d bytes, %v; want none (nothing urgent, no heartbeat due)", (at-t0)/1e6, len(b), err)
		}
	}
	entries := func(at int64) map[string]wire.Delta {
		t.Helper()
		b, err := c.SyncOut(at, nil)
		if err != nil || len(b) == 0 {
			t.Fatalf("no heartbeat at %d s: %v", (at-t0)/1e9, err)
		}
		var batch wire.Batch
		if err := batch.UnmarshalMsg(b); err != nil {
			t.Fatal(err)
		}
		got := map[string]wire.Delta{}
		for _, d := range batch.Entries {
			if d.Delta == 0 && d.Demand == 0 {
				got[d.Key] = d
			}
		}
		return got
	}
	// The heartbeat reports both admissions (cost 1 each, not a name),
	// then, once answered, the next one names short alone: its lease
	// lapsed with 4 units left, long's lives.
	entries(t0 + 10e9)
	rp = wire.Reply{Version: wire.Version, Seq: 2, At: t0 + 10e9, Entries: []wire.View{
		{Limiter: "s", Key: "short", Window: w, Count: 2, Lease: 4, Isolates: 2, Life: 1e9},
		{Limiter: "s", Key: "long", Window: w, Count: 2, Lease: 4, Isolates: 2, Life: 30e9}}}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+10e9+20e6); err != nil {
		t.Fatal(err)
	}
	got := entries(t0 + 20e9)
	if d, ok := got["short"]; !ok || d.Window != w || d.Limiter != "s" {
		t.Fatalf("the heartbeat after short's lease lapsed names %v; want short, window %d", got, w)
	}
	if _, ok := got["long"]; ok {
		t.Fatalf("the heartbeat names long, whose lease lives (%v)", got)
	}
	// The reply gives short nothing (it asked for nothing): its next
	// heartbeat names nothing.
	rp = wire.Reply{Version: wire.Version, Seq: 3, At: t0 + 20e9, Entries: []wire.View{
		{Limiter: "s", Key: "short", Window: w, Count: 2, Lease: 0, Isolates: 2, Life: 1e9}}}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+20e9+20e6); err != nil {
		t.Fatal(err)
	}
	if got := entries(t0 + 30e9); len(got) != 0 {
		t.Fatalf("after short's lapse was answered the heartbeat names %v; want nothing", got)
	}
}
