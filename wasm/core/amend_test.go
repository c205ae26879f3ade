package core

import (
	"bytes"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A request held while a batch is in flight is asked for by an amendment
// of that batch (same Seq, time and entries), once; the amendment's reply
// admits it, and the next batch does not ask for it again.
func TestAmendAsksForHeldRequests(t *testing.T) {
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: 1e9, Mode: wire.Strict},
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 100, Period: 1e9}}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	t0 := int64(5e9)
	w := t0 / 1e9
	decode := func(out []byte) wire.Batch {
		t.Helper()
		var b wire.Batch
		if err := b.UnmarshalMsg(out); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if out, err := c.Amend(t0, nil); err != nil || len(out) != 0 {
		t.Fatalf("no batch in flight: amendment %d bytes, %v; want none", len(out), err)
	}
	if err := c.Decide(0, []byte("o"), 1, t0, &r); err != nil || !r.SyncRetry {
		t.Fatalf("o: %+v, %v; want SyncRetry", r, err)
	}
	first, err := c.SyncOut(t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	b1 := decode(first)
	if out, _ := c.Amend(t0+1e6, nil); len(out) != 0 {
		t.Fatal("an amendment with nothing held since the cut")
	}
	// While it is in flight a request for k is held: the amendment asks.
	if err := c.Decide(0, []byte("k"), 1, t0+1e6, &r); err != nil || !r.SyncRetry {
		t.Fatalf("k: %+v, %v; want SyncRetry", r, err)
	}
	c.Decide(1, []byte("x"), 1, t0+1e6, &r) // an approximate key asks nothing
	out, err := c.Amend(t0+2e6, nil)
	if err != nil {
		t.Fatal(err)
	}
	am := decode(out)
	if am.Seq != b1.Seq || am.At != b1.At || len(am.Entries) != len(b1.Entries) ||
		len(am.Asks) != 1 || am.Asks[0] != (wire.Ask{Limiter: "s", Key: "k", Window: w, Cost: 1}) {
		t.Fatalf("amendment %+v of batch %+v", am, b1)
	}
	if again, _ := c.Amend(t0+3e6, nil); len(again) != 0 {
		t.Fatal("a second amendment asked for k again")
	}
	if re, _ := c.SyncOut(t0+4e6, nil); !bytes.Equal(re, out) {
		t.Fatal("SyncOut does not resend the amendment")
	}
	// Another held request: the next amendment asks for both (an ask is
	// what the isolate needs from the cut on, not an increment).
	if err := c.Decide(0, []byte("k"), 2, t0+5e6, &r); err != nil || !r.SyncRetry {
		t.Fatalf("k again: %+v, %v", r, err)
	}
	if am2 := decode(must(c.Amend(t0+5e6, nil))); len(am2.Asks) != 1 || am2.Asks[0].Cost != 3 {
		t.Fatalf("amendment 2: %+v", am2)
	}
	// The reply grants them: both admitted on the reply's leases.
	now := t0 + 40e6
	rp := wire.Reply{Version: wire.Version, Seq: c.seq, At: now, Entries: []wire.View{
		{Limiter: "s", Key: "o", Window: w, Lease: 1, Isolates: 1},
		{Limiter: "s", Key: "k", Window: w, Lease: 3, Isolates: 1}}}
	if err := c.SyncIn(rp.AppendMsg(nil), now); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		key  string
		cost int64
	}{{"o", 1}, {"k", 1}, {"k", 2}} {
		if err := c.Decide(0, []byte(k.key), k.cost, now, &r); err != nil || !r.Allowed {
			t.Fatalf("%s after the amendment's reply: %+v, %v; want admitted", k.key, r, err)
		}
	}
	b2 := decode(must(c.SyncOut(now+1e6, nil)))
	for _, e := range b2.Entries {
		if e.Key == "k" && (e.Delta != 3 || e.Demand != 3) {
			t.Fatalf("k in the next batch: %+v; want delta 3, demand 3 (asked once)", e)
		}
	}
	if len(b2.Asks) != 0 {
		t.Fatalf("a new batch carries asks: %+v", b2)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzAmendAndSecondReply: an amendment decodes as its batch with asks, and
// arbitrary bytes taken as a second reply to the batch (before or after the
// next batch is cut: cut) never panic nor break the core (a refused one
// changes nothing it reports).
func FuzzAmendAndSecondReply(f *testing.F) {
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso", MaxKeys: 8, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 10, Period: 1e9, Mode: wire.Strict}}}
	good := wire.Reply{Version: wire.Version, Seq: 1, At: 5e9, Entries: []wire.View{
		{Limiter: "s", Key: "a", Window: 2, Lease: 1, Isolates: 1, Life: 1e9},
		{Limiter: "s", Key: "b", Window: 2, Lease: 3, Isolates: 1, Life: 1e9}}}
	f.Add(good.AppendMsg(nil), int64(2e9+50e6), false)
	f.Add(good.AppendMsg(nil), int64(2e9+150e6), true)
	good.At, good.Entries[1].Lease = 4e9, 1<<50
	f.Add(good.AppendMsg(nil), int64(2e9+60e6), false)
	f.Add([]byte{0x81, 0xa1, 'e', 0x90}, int64(1), true)
	f.Fuzz(func(t *testing.T, second []byte, now int64, cut bool) {
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var r Result
		c.Decide(0, []byte("a"), 1, 2e9, &r)
		b, err := c.SyncOut(2e9+1, nil)
		if err != nil || len(b) == 0 {
			t.Fatalf("SyncOut: %v", err)
		}
		batch := append([]byte(nil), b...)
		c.Decide(0, []byte("b"), 1, 2e9+2, &r)
		out, err := c.Amend(2e9+3, nil)
		if err != nil {
			t.Fatal(err)
		}
		var bb, am wire.Batch
		if err := bb.UnmarshalMsg(batch); err != nil {
			t.Fatal(err)
		}
		if err := am.UnmarshalMsg(out); err != nil || am.Seq != bb.Seq || am.At != bb.At || len(am.Entries) != len(bb.Entries) || len(am.Asks) != 1 {
			t.Fatalf("amendment %+v (%v) of %+v", am, err, bb)
		}
		first := wire.Reply{Version: wire.Version, Seq: 1, At: 4e9, Entries: []wire.View{{Limiter: "s", Key: "a", Window: 2, Lease: 1, Isolates: 1, Life: 1e9}}}
		if err := c.SyncIn(first.AppendMsg(nil), 2e9+40e6); err != nil {
			t.Fatal(err)
		}
		if now < 0 {
			now = -now
		}
		if cut {
			// The next batch is cut first: second lands as the
			// amendment's reply after it (taken while batch 2 flies).
			c.Decide(0, []byte("c"), 1, 2e9+100e6, &r)
			if b, err := c.SyncOut(2e9+100e6, nil); err != nil || len(b) == 0 {
				t.Fatalf("batch 2: %v", err)
			}
		}
		replies := c.Stats().Replies
		if err := c.SyncIn(second, now); err != nil && c.Stats().Replies != replies {
			t.Fatal("a refused second reply counted as a reply")
		}
		for _, k := range []string{"a", "b", "c"} {
			if err := c.Decide(0, []byte(k), 1, now+1e9, &r); err != nil {
				t.Fatal(err)
			}
			if r.Remaining < 0 || r.Remaining > 10 {
				t.Fatalf("%s: remaining %d of a limit of 10", k, r.Remaining)
			}
		}
	})
}

// The batch's own reply, made before the coordinator saw the amendment,
// grants nothing for the amendment's asks: the request it held waits for
// the amendment's reply (no dry spell), which admits it.
func TestBatchReplyBeforeAmendmentsIsNoDrySpell(t *testing.T) {
	c := strictCore(t)
	t0 := int64(5e9)
	w := t0 / 1e9
	reply := func(at, lease int64) error {
		rp := wire.Reply{Version: wire.Version, Seq: c.seq, At: at, Entries: []wire.View{
			{Limiter: "s", Key: "k", Window: w, Count: 1, Lease: lease, Isolates: 2, Life: 1e9}}}
		return c.SyncIn(rp.AppendMsg(nil), at)
	}
	var r Result
	// k holds a lease of 1, spends it, and its batch reports it (no ask).
	if err := c.Decide(0, []byte("k"), 1, t0, &r); err != nil || !r.SyncRetry {
		t.Fatalf("%+v %v", r, err)
	}
	must(c.SyncOut(t0, nil))
	if err := reply(t0+40e6, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(0, []byte("k"), 1, t0+40e6, &r); err != nil || !r.Allowed {
		t.Fatalf("k on its lease: %+v %v", r, err)
	}
	// A request for o cuts a batch, which reports k's unit and asks
	// nothing for k; it comes 600 ms after the first, so the isolate
	// syncs less than four times a window and a held request amends its
	// batch whatever k's last grant (expectCovered).
	if err := c.Decide(0, []byte("o"), 1, t0+600e6, &r); err != nil || !r.SyncRetry {
		t.Fatalf("o: %+v %v", r, err)
	}
	must(c.SyncOut(t0+600e6, nil))
	// While it is in flight a request is held and amended.
	if err := c.Decide(0, []byte("k"), 1, t0+610e6, &r); err != nil || !r.SyncRetry {
		t.Fatalf("held: %+v %v", r, err)
	}
	if out := must(c.Amend(t0+610e6, nil)); len(out) == 0 {
		t.Fatal("no amendment")
	}
	// The batch's reply grants nothing: the request is held again.
	if err := reply(t0+640e6, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(0, []byte("k"), 1, t0+640e6, &r); err != nil || !r.SyncRetry {
		t.Fatalf("after the batch's reply: %+v %v; want SyncRetry (no dry spell)", r, err)
	}
	// The amendment's reply grants it.
	if err := reply(t0+650e6, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(0, []byte("k"), 1, t0+650e6, &r); err != nil || !r.Allowed {
		t.Fatalf("after the amendment's reply: %+v %v; want admitted", r, err)
	}
}

// A second reply made before the first (an amendment that overtook its
// batch at the coordinator) brings the views the first lacked, not older
// ones of keys the first already answered.
func TestSecondReplyOlderThanTheFirst(t *testing.T) {
	c := strictCore(t)
	t0 := int64(5e9)
	w := t0 / 1e9
	var r Result
	c.Decide(0, []byte("a"), 1, t0, &r)
	must(c.SyncOut(t0, nil))
	c.Decide(0, []byte("b"), 1, t0+1e6, &r)
	if out := must(c.Amend(t0+1e6, nil)); len(out) == 0 {
		t.Fatal("no amendment")
	}
	reply := func(at, now int64, views ...wire.View) {
		t.Helper()
		rp := wire.Reply{Version: wire.Version, Seq: c.seq, At: at, Entries: views}
		if err := c.SyncIn(rp.AppendMsg(nil), now); err != nil {
			t.Fatal(err)
		}
	}
	// The batch's reply (made at +30 ms) comes first: a's lease of 3.
	reply(t0+30e6, t0+40e6, wire.View{Limiter: "s", Key: "a", Window: w, Lease: 3, Isolates: 1, Life: 1e9})
	// The amendment's (made at +20 ms, before it): a's older lease of 1,
	// and b's, which the first lacked.
	reply(t0+20e6, t0+41e6, wire.View{Limiter: "s", Key: "a", Window: w, Lease: 1, Isolates: 1, Life: 1e9},
		wire.View{Limiter: "s", Key: "b", Window: w, Lease: 1, Isolates: 1, Life: 1e9})
	for i, want := range []bool{true, true, true, false} {
		if err := c.Decide(0, []byte("a"), 1, t0+42e6, &r); err != nil || r.Allowed != want {
			t.Fatalf("a, request %d: %+v %v; want allowed %v (the newer lease of 3 holds)", i, r, err, want)
		}
	}
	if err := c.Decide(0, []byte("b"), 1, t0+42e6, &r); err != nil || !r.Allowed {
		t.Fatalf("b: %+v %v; want admitted on the second reply's lease", r, err)
	}
}

// strictCore returns a core with one strict fixed-window limiter "s" of
// 100 per second.
func strictCore(t *testing.T) *Core {
	t.Helper()
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: 1e9, Mode: wire.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
