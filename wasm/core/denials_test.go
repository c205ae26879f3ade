package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The module reports its final denials (wire.Batch.Denials): a denial the
// view alone decides (no sync) is reported with the next batch and makes
// none alone; a request answered SyncRetry and admitted after the sync is
// not a denial.
func TestFinalDenialsReported(t *testing.T) {
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 5, Period: 1e9},
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 5, Period: 1e9, Mode: wire.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	now := int64(5e9)
	batch := func(b []byte) *wire.Batch {
		t.Helper()
		var out wire.Batch
		if err := out.UnmarshalMsg(b); err != nil {
			t.Fatal(err)
		}
		return &out
	}
	reply := func(views ...wire.View) {
		t.Helper()
		rp := wire.Reply{Version: wire.Version, Seq: c.seq, At: now, Entries: views}
		if err := c.SyncIn(rp.AppendMsg(nil), now); err != nil {
			t.Fatal(err)
		}
	}
	// A view of "a"/"full" at its limit, and a strict lease on "s"/"k"
	// to come: the first batch asks for it.
	c.Decide(0, []byte("full"), 1, now, &r)
	if err := c.Decide(1, []byte("k"), 1, now, &r); err != nil || !r.SyncRetry {
		t.Fatalf("s/k: %+v, %v; want SyncRetry", r, err)
	}
	b, err := c.SyncOut(now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := batch(b); !got.ReportsDenials() || len(got.Denials) != 0 {
		t.Fatalf("first batch: denials %v (reports %v); want none reported, the SyncRetry is not final", got.Denials, got.ReportsDenials())
	}
	now += 40e6
	reply(wire.View{Limiter: "a", Key: "full", Window: now / 1e9, Count: 5, Lease: -1, Isolates: 2},
		wire.View{Limiter: "s", Key: "k", Window: now / 1e9, Lease: 1, Isolates: 2})
	if err := c.Decide(1, []byte("k"), 1, now, &r); err != nil || !r.Allowed {
		t.Fatalf("s/k after the reply: %+v, %v; want admitted", r, err)
	}
	// Three denials the view decides: no sync wanted, no batch alone.
	for i := 0; i < 3; i++ {
		if err := c.Decide(0, []byte("full"), 1, now, &r); err != nil || r.Allowed || r.SyncRetry || r.SyncWanted {
			t.Fatalf("a/full: %+v, %v; want a quiet denial", r, err)
		}
	}
	if b, err := c.SyncOut(now+1e6, nil); err != nil || len(b) != 0 {
		t.Fatalf("denials alone cut a batch (%d bytes, %v)", len(b), err)
	}
	// The next batch (an admission on another key) carries them.
	now += 100e6
	c.Decide(0, []byte("other"), 1, now, &r)
	b, err = c.SyncOut(now, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := batch(b)
	var full, k int64
	got.EachDenial(func(limiter, key string, _, cost int64) {
		switch limiter + "/" + key {
		case "a/full":
			full += cost
		case "s/k":
			k += cost
		}
	})
	if full != 3 || k != 0 {
		t.Fatalf("reported denials a/full %d, s/k %d; want 3 and 0 (denials %+v)", full, k, got.Denials)
	}
}

// Denials never make a batch alone, also when the only other entry due is
// one whose windows ended before it was sent (nothing left to report): they
// wait for the next batch, and are in it.
func TestDenialsWaitForABatch(t *testing.T) {
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 5, Period: 1e9}}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	now := int64(5e9)
	// A view of "full" at its limit.
	c.Decide(0, []byte("full"), 1, now, &r)
	if _, err := c.SyncOut(now, nil); err != nil {
		t.Fatal(err)
	}
	rp := wire.Reply{Version: wire.Version, Seq: c.seq, At: now, Entries: []wire.View{
		{Limiter: "a", Key: "full", Window: 5, Count: 5, Lease: -1, Isolates: 2}}}
	if err := c.SyncIn(rp.AppendMsg(nil), now); err != nil {
		t.Fatal(err)
	}
	// An admission on "old" in window 5, never sent; two denials of
	// "full" from the view; the host next syncs in window 7.
	c.Decide(0, []byte("old"), 1, now+1e6, &r)
	for i := 0; i < 2; i++ {
		if c.Decide(0, []byte("full"), 1, now+2e6, &r); r.Allowed || r.SyncRetry {
			t.Fatalf("full: %+v, want a denial from the view", r)
		}
	}
	if b, err := c.SyncOut(7e9, nil); err != nil || len(b) != 0 {
		t.Fatalf("a batch of %d bytes (%v) for denials and an entry whose windows ended", len(b), err)
	}
	c.Decide(0, []byte("new"), 1, 7e9, &r)
	b, err := c.SyncOut(7e9, nil)
	if err != nil || len(b) == 0 {
		t.Fatalf("no batch for an admission (%v)", err)
	}
	var got wire.Batch
	if err := got.UnmarshalMsg(b); err != nil {
		t.Fatal(err)
	}
	if len(got.Denials) != 1 || got.Denials[0].Key != "full" || got.Denials[0].Cost != 2 {
		t.Fatalf("denials %+v, want full's 2", got.Denials)
	}
}
