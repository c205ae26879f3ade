package core_test

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestReincarnationNamesItsPredecessor: an isolate holding leases on
// three keys has its batch (key a alone) refused for its sequence number
// and reincarnates. Its batch 1 (the refused deltas) and the next, which
// names every leased key, carry the old id and secret (wire.Batch.Prev,
// PrevSecret), so the coordinator can move the old id's leases; the batch
// after carries no predecessor, and the leases served requests
// throughout. An incarnation with no answered batch, or no secret, names
// none: the coordinator could not check it.
func TestReincarnationNamesItsPredecessor(t *testing.T) {
	const secret1, secret2, secret3 = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210", "00112233445566778899aabbccddeeff"
	cfg := strictCfg(wire.SlidingWindow, 100, 60*sec)
	cfg.IsolateID, cfg.IsolateSecret = "iso-1", secret1
	c := mustCore(t, cfg)
	fc := newFakeCoord(t, cfg)
	fc.lease = func(string, lkey, int64) int64 { return 5 }
	now := 10 * sec
	var r core.Result
	decide := func(k string) bool {
		t.Helper()
		if err := c.Decide(0, []byte(k), 1, now, &r); err != nil {
			t.Fatal(err)
		}
		return r.Allowed
	}
	for _, k := range []string{"a", "b", "c"} {
		if decide(k) {
			t.Fatalf("%s admitted before any lease", k)
		}
		fc.sync(c, now)
		if !decide(k) {
			t.Fatalf("%s denied with a lease: %+v", k, r)
		}
		fc.sync(c, now)
	}
	cut := func() wire.Batch {
		t.Helper()
		out, err := c.SyncOut(now, nil)
		if err != nil || len(out) == 0 {
			t.Fatalf("no batch: %v", err)
		}
		var b wire.Batch
		if err := b.UnmarshalMsg(out); err != nil {
			t.Fatal(err)
		}
		return b
	}
	keysOf := func(b wire.Batch) (ks []string) {
		for _, e := range b.Entries {
			ks = append(ks, e.Key)
		}
		return ks
	}
	decide("a")
	refused := cut()
	if ks := keysOf(refused); len(ks) != 1 || refused.Prev != "" {
		t.Fatalf("batch before the reincarnation: keys %v, prev %q", ks, refused.Prev)
	}
	if err := c.Reincarnate("iso-1~2", secret2); err != nil {
		t.Fatal(err)
	}
	b1 := cut()
	if b1.Seq != 1 || b1.Isolate != "iso-1~2" || b1.Prev != "iso-1" || b1.PrevSecret != secret1 || len(b1.Entries) != 1 {
		t.Fatalf("batch 1 of the new incarnation: %+v, want the refused deltas naming iso-1 and its secret", b1)
	}
	if err := c.SyncIn(fc.handle(mustAppend(b1), now), now); err != nil {
		t.Fatal(err)
	}
	b2 := cut() // nothing to report but the leased keys
	if ks := keysOf(b2); b2.Seq != 2 || b2.Prev != "iso-1" || len(ks) != 3 {
		t.Fatalf("batch 2: seq %d, prev %q, keys %v; want every leased key (a, b, c) naming iso-1", b2.Seq, b2.Prev, ks)
	}
	if err := c.SyncIn(fc.handle(mustAppend(b2), now), now); err != nil {
		t.Fatal(err)
	}
	if !decide("b") {
		t.Fatalf("b denied after the handover: %+v", r)
	}
	b3 := cut()
	if b3.Prev != "" || b3.PrevSecret != "" {
		t.Fatalf("batch 3 still names %q: the handover ended with batch 2's reply", b3.Prev)
	}
	if err := c.SyncIn(fc.handle(mustAppend(b3), now), now); err != nil {
		t.Fatal(err)
	}

	// A chain: iso-1~2, whose batches were answered, is left for
	// iso-1~3, whose batch 1 is refused too: iso-1~4 goes on handing over
	// from iso-1~2 (nothing moved under iso-1~3). An incarnation without a
	// secret (iso-1~5) names none when it is left.
	decide("c")
	cut()
	if err := c.Reincarnate("iso-1~3", secret3); err != nil {
		t.Fatal(err)
	}
	b := cut()
	if b.Prev != "iso-1~2" {
		t.Fatalf("after answered batches, prev %q, want iso-1~2", b.Prev)
	}
	if err := c.Reincarnate("iso-1~4", secret2); err != nil { // batch 1 of iso-1~3 refused too
		t.Fatal(err)
	}
	if b := cut(); b.Prev != "iso-1~2" {
		t.Fatalf("iso-1~3 had no batch answered: prev %q, want the handover from iso-1~2 to go on", b.Prev)
	}
	if err := c.Reincarnate("iso-1~5", ""); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncIn(fc.handle(mustAppend(cut()), now), now); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the handover from iso-1~2 ends
		fc.sync(c, now)
	}
	decide("a")
	cut()
	if err := c.Reincarnate("iso-1~6", secret3); err != nil {
		t.Fatal(err)
	}
	if b := cut(); b.Prev != "" {
		t.Fatalf("iso-1~5 had no secret: prev %q, want none", b.Prev)
	}
}

func mustAppend(b wire.Batch) []byte { return b.AppendMsg(nil) }
