package core

import (
	"errors"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// An amendment's reply that comes after the next batch was cut is taken
// while that batch is in flight: its lease counts from the amended batch's
// cut, so what the isolate admitted since (the next batch's deltas) is
// taken off it, and the lease lives from that cut. Once the next batch's
// reply is applied it is refused; a batch that was not amended takes no
// reply after the next cut.
func TestAmendmentReplyAfterTheNextCut(t *testing.T) {
	const t0 = int64(5e9)
	w := t0 / 1e9
	var r Result
	// Held: a (asked by batch 1) and b (asked by its amendment); the reply
	// to batch 1 grants a's unit only: a is admitted, b held again, and
	// batch 2 is cut.
	setup := func(t *testing.T, amend bool) *Core {
		t.Helper()
		c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
			{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: 1e9, Mode: wire.Strict}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Decide(0, []byte("k"), 1, t0, &r); err != nil || !r.SyncRetry {
			t.Fatalf("a: %+v, %v; want SyncRetry", r, err)
		}
		must(c.SyncOut(t0, nil))
		if amend {
			if err := c.Decide(0, []byte("k"), 1, t0+1e6, &r); err != nil || !r.SyncRetry {
				t.Fatalf("b: %+v, %v; want SyncRetry", r, err)
			}
			if out := must(c.Amend(t0+1e6, nil)); len(out) == 0 {
				t.Fatal("no amendment")
			}
		}
		rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0 + 20e6, Entries: []wire.View{
			{Limiter: "s", Key: "k", Window: w, Count: 0, Lease: 1, Isolates: 1, Life: 1e9}}}
		if err := c.SyncIn(rp.AppendMsg(nil), t0+40e6); err != nil {
			t.Fatal(err)
		}
		if err := c.Decide(0, []byte("k"), 1, t0+40e6, &r); err != nil || !r.Allowed {
			t.Fatalf("a on the batch's lease: %+v, %v; want admitted", r, err)
		}
		// b (decided again, or new without an amendment) is held: batch 2
		// asks for it.
		if err := c.Decide(0, []byte("k"), 1, t0+40e6, &r); err != nil || !r.SyncRetry {
			t.Fatalf("b after the batch's reply: %+v, %v; want SyncRetry", r, err)
		}
		if b, _ := c.SyncOut(t0+100e6, nil); len(b) == 0 {
			t.Fatal("batch 2 not cut")
		}
		return c
	}
	amendReplyAt := func(at, lease, life int64) []byte {
		rp := wire.Reply{Version: wire.Version, Seq: 1, At: at, Entries: []wire.View{
			{Limiter: "s", Key: "k", Window: w, Count: 0, Lease: lease, Isolates: 1, Life: life}}}
		return rp.AppendMsg(nil)
	}
	amendReply := func(lease, life int64) []byte { return amendReplyAt(t0+30e6, lease, life) }
	t.Run("its lease less what batch 2 reports", func(t *testing.T) {
		c := setup(t, true)
		// The amendment's lease of 1 (from batch 1's cut) is a's: used.
		if err := c.SyncIn(amendReply(1, 1e9), t0+110e6); err != nil {
			t.Fatalf("the amendment's reply after the next cut: %v", err)
		}
		if err := c.Decide(0, []byte("k"), 1, t0+110e6, &r); err != nil || r.Allowed {
			t.Fatalf("b on a lease a used: %+v, %v; want not admitted", r, err)
		}
		// b asked in batch 2 already: decided again it asks for nothing
		// new, so an amendment of batch 2 for a new request c asks for
		// b and c (2), not for b twice (3: a unit granted and stranded).
		if err := c.Decide(0, []byte("k"), 1, t0+120e6, &r); err != nil || !r.SyncRetry {
			t.Fatalf("c: %+v, %v; want SyncRetry", r, err)
		}
		var am wire.Batch
		if err := am.UnmarshalMsg(must(c.Amend(t0+120e6, nil))); err != nil {
			t.Fatal(err)
		}
		if len(am.Asks) != 1 || am.Asks[0].Cost != 2 {
			t.Fatalf("batch 2's amendment asks %+v; want k: 2 (b and c)", am.Asks)
		}
	})
	t.Run("admits on what is left", func(t *testing.T) {
		c := setup(t, true)
		if err := c.SyncIn(amendReply(2, 1e9), t0+110e6); err != nil {
			t.Fatal(err)
		}
		if err := c.Decide(0, []byte("k"), 1, t0+110e6, &r); err != nil || !r.Allowed {
			t.Fatalf("b: %+v, %v; want admitted on the amendment's lease", r, err)
		}
		if err := c.Decide(0, []byte("k"), 1, t0+110e6, &r); err != nil || r.Allowed {
			t.Fatalf("c: %+v, %v; want not admitted (the lease is spent)", r, err)
		}
		// Batch 2's reply, then the amendment's again: refused.
		rp := wire.Reply{Version: wire.Version, Seq: 2, At: t0 + 120e6, Entries: []wire.View{
			{Limiter: "s", Key: "k", Window: w, Count: 1, Lease: 1, Isolates: 1, Life: 1e9}}}
		if err := c.SyncIn(rp.AppendMsg(nil), t0+140e6); err != nil {
			t.Fatal(err)
		}
		if err := c.SyncIn(amendReply(5, 1e9), t0+150e6); !errors.Is(err, ErrStaleReply) {
			t.Fatalf("the amendment's reply after batch 2's: %v; want ErrStaleReply", err)
		}
	})
	t.Run("its life runs from the amended batch's cut", func(t *testing.T) {
		c := setup(t, true)
		if err := c.SyncIn(amendReply(2, 150e6), t0+110e6); err != nil {
			t.Fatal(err)
		}
		// Batch 1 was cut at t0: the lease is void from t0+150ms (from
		// batch 2's cut it would live until t0+250ms).
		if err := c.Decide(0, []byte("k"), 1, t0+160e6, &r); err != nil || r.Allowed {
			t.Fatalf("b after the lease's life: %+v, %v; want not admitted", r, err)
		}
	})
	t.Run("older than the batch's reply", func(t *testing.T) {
		c := setup(t, true)
		// Made at t0+10ms, before batch 1's reply (t0+20ms): its view is
		// older than the key's, and is not taken.
		if err := c.SyncIn(amendReplyAt(t0+10e6, 2, 1e9), t0+110e6); err != nil {
			t.Fatal(err)
		}
		if err := c.Decide(0, []byte("k"), 1, t0+110e6, &r); err != nil || r.Allowed {
			t.Fatalf("b on an older view's lease: %+v, %v; want not admitted", r, err)
		}
	})
	t.Run("a batch not amended", func(t *testing.T) {
		c := setup(t, false)
		if err := c.SyncIn(amendReply(2, 1e9), t0+110e6); !errors.Is(err, ErrStaleReply) {
			t.Fatalf("a reply to batch 1 after batch 2 was cut, batch 1 not amended: %v; want ErrStaleReply", err)
		}
	})
}
