package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// An isolate whose view says the window is exhausted, counting its own
// lease, denies locally for a dry spell once that lease is spent. But when
// the lease lapsed with units left (its isolate idle past the lease's
// life), those units come back at its next batch: its next request asks
// (SyncRetry) instead of being denied quietly with a Retry-After of the
// spell; and once a reply says the window is no longer exhausted (the
// lapsed units given back, named by a batch the isolate sent for another
// key), the spell ends. Found on real workerd (20 a day, strict, two
// Workers, one syncing for another limiter meanwhile): after 1.5 s idle the
// Worker holding 2 units denied 3 requests with retryAfterMs 863998 (14.4
// minutes, a hundredth of the day), where they were free. The spell of a
// long window is at most maxDryBase (10 s) before its doublings.
func TestLapsedLeaseIsNoDrySpell(t *testing.T) {
	const P = 86400e9
	t0 := int64(1000*P + 3600e9)
	w := t0 / P
	// setup returns an isolate that was granted 3 units (1 used, 2 left,
	// living a second) on a window said exhausted, at t0+40 ms.
	setup := func() *Core {
		c := askedOnce(t, 20, t0, wire.View{Limiter: "s", Key: "k", Window: w, Count: 15, Lease: 3, Isolates: 2, Life: 1e9, Exhausted: true})
		var r Result
		if err := c.Decide(0, []byte("k"), 1, t0+40e6, &r); err != nil || !r.Allowed {
			t.Fatalf("on its lease: %+v, %v; want admitted", r, err)
		}
		return c
	}
	var r Result
	// Idle past the lease's life (it lapsed at t0+1040 ms), a reply for
	// another key heard just before: the request asks.
	c := setup()
	if err := c.Decide(0, []byte("o"), 1, t0+1000e6, &r); err != nil || !r.SyncRetry {
		t.Fatalf("other key: %+v, %v; want SyncRetry", r, err)
	}
	if b, err := c.SyncOut(t0+1000e6, nil); err != nil || len(b) == 0 {
		t.Fatalf("no batch: %v", err)
	}
	rp := wire.Reply{Version: wire.Version, Seq: 2, At: t0 + 1010e6, Entries: []wire.View{
		{Limiter: "s", Key: "o", Window: w, Lease: 1, Isolates: 1, Life: 1e9}}}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+1020e6); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(0, []byte("k"), 1, t0+1100e6, &r); err != nil || r.Allowed || !r.SyncRetry {
		t.Fatalf("after its lease lapsed with 2 units: %+v, %v; want SyncRetry (a sync gives them back)", r, err)
	}
	// A batch for another key named the lapse; its reply says the window
	// has room again (count 16 and the others' 3 reserved): the spell ends.
	c = setup()
	if err := c.Decide(0, []byte("o"), 1, t0+1300e6, &r); err != nil || !r.SyncRetry {
		t.Fatalf("other key: %+v, %v; want SyncRetry", r, err)
	}
	if b, err := c.SyncOut(t0+1300e6, nil); err != nil || len(b) == 0 {
		t.Fatalf("no batch: %v", err)
	}
	rp = wire.Reply{Version: wire.Version, Seq: 2, At: t0 + 1320e6, Entries: []wire.View{
		{Limiter: "s", Key: "o", Window: w, Lease: 1, Isolates: 1, Life: 1e9},
		{Limiter: "s", Key: "k", Window: w, Count: 16, Lease: 0, Isolates: 2, Life: 1e9}}}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+1340e6); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(0, []byte("k"), 1, t0+1500e6, &r); err != nil || r.Allowed || !r.SyncRetry {
		t.Fatalf("with the window no longer exhausted: %+v, %v; want SyncRetry", r, err)
	}
	// A reply that refuses its ask on an exhausted window: a quiet
	// denial, for a spell of at most maxDryBase, not a hundredth of the
	// day.
	if b, err := c.SyncOut(t0+1500e6, nil); err != nil || len(b) == 0 {
		t.Fatalf("no batch: %v", err)
	}
	rp = wire.Reply{Version: wire.Version, Seq: 3, At: t0 + 1520e6, Entries: []wire.View{
		{Limiter: "s", Key: "k", Window: w, Count: 17, Lease: 0, Isolates: 2, Life: 1e9, Exhausted: true}}}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+1540e6); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(0, []byte("k"), 1, t0+1600e6, &r); err != nil || r.Allowed || r.SyncRetry {
		t.Fatalf("refused on an exhausted window: %+v, %v; want a quiet denial", r, err)
	}
	if r.RetryAfter > 2*int64(maxDryBase) {
		t.Fatalf("dry spell of %d ms on a day's window, want at most %d ms", r.RetryAfter/1e6, 2*int64(maxDryBase)/1e6)
	}
}

// An ask refused on a window whose count is under its limit (the rest
// sits in other isolates' leases, which come back within their life or
// at their holders' next batches) denies quietly for at most reservedDry
// before asking again; on a window spent (its count at the limit), for
// the period's dry spell. Measured with real processes: after a SIGTERM
// restart, a new host's isolate asked while a sibling held the window's
// last units of a 100 a day key, and then denied for 10 s with the units
// free (B held at 66-69 of 70 in 5 of 17 runs).
func TestReservedWindowDrySpellIsShort(t *testing.T) {
	const P = 86400e9
	t0 := int64(1000*P + 3600e9)
	w := t0 / P
	for _, tc := range []struct {
		count int64
		short bool // a spell of at most reservedDry, then an ask (else to the window's end)
	}{{96, true}, {100, false}} {
		c := askedOnce(t, 100, t0, wire.View{Limiter: "s", Key: "k", Window: w, Count: tc.count, Lease: 0, Isolates: 4, Life: 1e9, Exhausted: true})
		var r Result
		if err := c.Decide(0, []byte("k"), 1, t0+50e6, &r); err != nil || r.Allowed || r.SyncRetry {
			t.Fatalf("count %d: after the refusal %+v, %v; want a quiet denial", tc.count, r, err)
		}
		if short := r.RetryAfter <= reservedDry; short != tc.short {
			t.Errorf("count %d of 100: dry spell of %d ms; want at most %d ms: %v", tc.count, r.RetryAfter/1e6, int64(reservedDry)/1e6, tc.short)
		}
		if !tc.short {
			continue
		}
		// Two sync intervals without a reply, 0.7 s of the spell left: the
		// denial may be stale (a reset over Redis, which sends no reset
		// notices): the request syncs first, though under minHold.
		if err := c.Decide(0, []byte("k"), 1, t0+340e6, &r); err != nil || !r.SyncRetry {
			t.Errorf("count %d of 100: 300 ms after the refusal, nothing heard since: %+v, %v; want a recheck (SyncRetry)", tc.count, r, err)
		}
		if err := c.Decide(0, []byte("k"), 1, t0+50e6+reservedDry, &r); err != nil || !r.SyncRetry {
			t.Errorf("count %d of 100: %d ms after the refusal %+v, %v; want it to ask again", tc.count, int64(reservedDry)/1e6, r, err)
		}
	}
}

// askedOnce returns an isolate of a strict fixed window of limit per day
// ("s") whose first request on "k", at t0, asked, and whose batch's reply
// (made at t0+20 ms) carried v, applied at t0+40 ms.
func askedOnce(t *testing.T, limit, t0 int64, v wire.View) *Core {
	t.Helper()
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "a", Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: limit, Period: 86400e9, Mode: wire.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := c.Decide(0, []byte("k"), 1, t0, &r); err != nil || !r.SyncRetry {
		t.Fatalf("first request: %+v, %v; want SyncRetry", r, err)
	}
	if b, err := c.SyncOut(t0, nil); err != nil || len(b) == 0 {
		t.Fatalf("no batch: %v", err)
	}
	rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0 + 20e6, Entries: []wire.View{v}}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+40e6); err != nil {
		t.Fatal(err)
	}
	return c
}
