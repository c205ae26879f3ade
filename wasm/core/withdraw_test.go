package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A held request the host denies for good (its retries used up) takes its
// ask back: the next batch asks nothing for it, and reports it as a final
// denial. An ask a batch already carried stays asked.
func TestWithdrawTakesBackTheLastAsk(t *testing.T) {
	const t0 = int64(100e9)
	newCore := func(t *testing.T) *Core {
		c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
			{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: 60e9, Mode: wire.Strict}}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	batchOf := func(t *testing.T, c *Core, now int64) wire.Batch {
		t.Helper()
		var b wire.Batch
		out := must(c.SyncOut(now, nil))
		if len(out) == 0 {
			return b
		}
		if err := b.UnmarshalMsg(out); err != nil {
			t.Fatal(err)
		}
		return b
	}
	var r Result
	t.Run("withdrawn before the next batch", func(t *testing.T) {
		c := newCore(t)
		if err := c.Decide(0, []byte("k"), 3, t0, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%+v, %v; want SyncRetry", r, err)
		}
		c.Withdraw()
		if b := batchOf(t, c, t0+1e6); b.Seq != 0 {
			t.Fatalf("a batch cut for the withdrawn request: %+v", b)
		}
		// Its denial rides along with the next batch.
		if err := c.Decide(0, []byte("other"), 1, t0+2e6, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%+v, %v; want SyncRetry", r, err)
		}
		b := batchOf(t, c, t0+2e6)
		var den int64
		b.EachDenial(func(_, key string, _, cost int64) {
			if key == "k" {
				den += cost
			}
		})
		for _, e := range b.Entries {
			if e.Key == "k" && e.Demand > 0 {
				t.Fatalf("the batch asks for the withdrawn request: %+v", e)
			}
		}
		if den != 3 {
			t.Fatalf("denials reported for k: %d, want 3", den)
		}
	})
	t.Run("a decision after it is not withdrawn", func(t *testing.T) {
		c := newCore(t)
		if err := c.Decide(0, []byte("k"), 3, t0, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%+v, %v; want SyncRetry", r, err)
		}
		if err := c.Decide(0, []byte("k2"), 1, t0, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%+v, %v; want SyncRetry", r, err)
		}
		c.Withdraw() // k2's ask only
		b := batchOf(t, c, t0+1e6)
		asked := map[string]int64{}
		for _, e := range b.Entries {
			asked[e.Key] += e.Demand
		}
		if asked["k"] != 3 || asked["k2"] != 0 {
			t.Fatalf("asks %v; want k 3 (still held), k2 0 (withdrawn)", asked)
		}
	})
	t.Run("an ask a batch carried stays", func(t *testing.T) {
		c := newCore(t)
		if err := c.Decide(0, []byte("k"), 3, t0, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%+v, %v; want SyncRetry", r, err)
		}
		if b := batchOf(t, c, t0); len(b.Entries) != 1 || b.Entries[0].Demand != 3 {
			t.Fatalf("batch %+v; want k asking 3", b.Entries)
		}
		c.Withdraw()
		if b := batchOf(t, c, t0); len(b.Entries) != 1 || b.Entries[0].Demand != 3 {
			t.Fatalf("the batch in flight changed: %+v", b.Entries)
		}
	})
	t.Run("an earlier ask of the same request, not sent yet", func(t *testing.T) {
		// k is held while batch 1 (for x) is in flight, so its ask waits
		// for batch 2; batch 1's reply comes, k is decided again (asking
		// nothing new: its ask is unsent) and denied for good.
		c := newCore(t)
		if err := c.Decide(0, []byte("x"), 1, t0, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%+v, %v; want SyncRetry", r, err)
		}
		w := t0 / 60e9
		must(c.SyncOut(t0, nil))
		if err := c.Decide(0, []byte("k"), 1, t0+1e6, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%+v, %v; want SyncRetry", r, err)
		}
		rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0 + 20e6, Entries: []wire.View{
			{Limiter: "s", Key: "x", Window: w, Count: 0, Lease: 1, Isolates: 1, Life: 1e9}}}
		if err := c.SyncIn(rp.AppendMsg(nil), t0+40e6); err != nil {
			t.Fatal(err)
		}
		if err := c.Decide(0, []byte("k"), 1, t0+41e6, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%+v, %v; want SyncRetry", r, err)
		}
		c.Withdraw()
		b := batchOf(t, c, t0+42e6)
		for _, e := range b.Entries {
			if e.Key == "k" && e.Demand > 0 {
				t.Fatalf("the batch asks for the withdrawn request: %+v", e)
			}
		}
	})
	t.Run("two held requests on a key, one denied for good", func(t *testing.T) {
		// The next batch asks for the one still held only, whether an
		// amendment of the batch in flight carried both or not.
		w := t0 / 60e9
		for _, amended := range []bool{false, true} {
			c := newCore(t)
			if err := c.Decide(0, []byte("x"), 1, t0, &r); err != nil || !r.SyncRetry {
				t.Fatalf("%+v, %v; want SyncRetry", r, err)
			}
			must(c.SyncOut(t0, nil))
			for i := 0; i < 2; i++ {
				if err := c.Decide(0, []byte("k"), 1, t0+1e6, &r); err != nil || !r.SyncRetry {
					t.Fatalf("%+v, %v; want SyncRetry", r, err)
				}
			}
			if amended && len(must(c.Amend(t0+2e6, nil))) == 0 {
				t.Fatal("no amendment")
			}
			rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0 + 20e6, Entries: []wire.View{
				{Limiter: "s", Key: "x", Window: w, Count: 0, Lease: 1, Isolates: 1, Life: 10e9}}}
			if err := c.SyncIn(rp.AppendMsg(nil), t0+40e6); err != nil {
				t.Fatal(err)
			}
			if err := c.Decide(0, []byte("k"), 1, t0+40e6, &r); err != nil || !r.SyncRetry {
				t.Fatalf("%+v, %v; want SyncRetry", r, err)
			}
			c.Withdraw() // the first, for good
			if err := c.Decide(0, []byte("k"), 1, t0+40e6, &r); err != nil || !r.SyncRetry {
				t.Fatalf("%+v, %v; want SyncRetry", r, err)
			}
			var asked int64
			for _, e := range batchOf(t, c, t0+41e6).Entries {
				if e.Key == "k" {
					asked += e.Demand
				}
			}
			if asked != 1 {
				t.Fatalf("amended %v: the next batch asks %d for k, want 1 (one request still held)", amended, asked)
			}
		}
	})
}

// A batch whose amendment asked for held requests, refused for its
// sequence number (409: a new incarnation), is resent as batch 1 of the
// new id with those asks: the amendment is void with the old id, and its
// requests are still held.
func TestReincarnateKeepsTheAmendmentsAsks(t *testing.T) {
	const t0 = int64(100e9)
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: 60e9, Mode: wire.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	for _, k := range []string{"x", "k"} {
		if err := c.Decide(0, []byte(k), 1, t0, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%s: %+v, %v; want SyncRetry", k, r, err)
		}
		if k == "x" {
			must(c.SyncOut(t0, nil))
		}
	}
	if len(must(c.Amend(t0+1e6, nil))) == 0 {
		t.Fatal("no amendment")
	}
	if err := c.Reincarnate("i~2", ""); err != nil {
		t.Fatal(err)
	}
	var b wire.Batch
	if err := b.UnmarshalMsg(must(c.SyncOut(t0+2e6, nil))); err != nil {
		t.Fatal(err)
	}
	asked := map[string]int64{}
	for _, a := range b.Asks {
		asked[a.Key] += a.Cost
	}
	if b.Isolate != "i~2" || b.Seq != 1 || asked["k"] != 1 {
		t.Fatalf("resent batch %s/%d asks %v; want batch 1 of i~2 asking 1 for k", b.Isolate, b.Seq, asked)
	}
}
