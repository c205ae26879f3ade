package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestReincarnateResendsOutstandingAsSeq1: the coordinator refused the
// outstanding batch's seq (the id was reused); Reincarnate makes the same
// deltas batch 1 of a new id, their reply is accepted, and the next batch
// is seq 2 of the new id. Nothing is lost or counted twice.
func TestReincarnateResendsOutstandingAsSeq1(t *testing.T) {
	const secret1, secret2 = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	cfg := approxCfg("iso-1", wire.FixedWindow, 100, 60*sec)
	cfg.IsolateSecret = secret1
	c := mustCore(t, cfg)
	fc := newFakeCoord(t, cfg)
	var r core.Result
	now := 5 * sec
	for seq := 1; seq <= 2; seq++ { // two batches of the first incarnation
		if err := c.Decide(0, []byte("a"), 1, now, &r); err != nil {
			t.Fatal(err)
		}
		out, err := c.SyncOut(now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SyncIn(fc.handle(out, now), now); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "b"} {
		if err := c.Decide(0, []byte(k), 3, now, &r); err != nil {
			t.Fatal(err)
		}
	}
	refused, err := c.SyncOut(now, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b0 wire.Batch
	if err := b0.UnmarshalMsg(refused); err != nil || b0.Seq != 3 || b0.Secret != secret1 {
		t.Fatalf("batch %+v, %v", b0, err)
	}
	if err := c.Reincarnate("iso-1~2", secret2); err != nil {
		t.Fatal(err)
	}
	if id := c.Config().IsolateID; id != "iso-1~2" {
		t.Fatalf("isolate id %q after Reincarnate", id)
	}
	resent, err := c.SyncOut(now+sec, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b1 wire.Batch
	if err := b1.UnmarshalMsg(resent); err != nil {
		t.Fatal(err)
	}
	if b1.Isolate != "iso-1~2" || b1.Secret != secret2 || b1.Seq != 1 || b1.At != b0.At || len(b1.Entries) != len(b0.Entries) {
		t.Fatalf("resent batch %+v, want %+v as seq 1 of iso-1~2 with its secret", b1, b0)
	}
	for i := range b0.Entries {
		if b1.Entries[i] != b0.Entries[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, b1.Entries[i], b0.Entries[i])
		}
	}
	if err := c.SyncIn(fc.handle(resent, now+sec), now+sec); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(0, []byte("a"), 0, now+sec, &r); err != nil || r.Remaining != 100-5 {
		t.Fatalf("after the resent batch: remaining %d, %v; want 95 (a counted once: 1+1+3)", r.Remaining, err)
	}
	if err := c.Decide(0, []byte("b"), 4, now+sec, &r); err != nil {
		t.Fatal(err)
	}
	next, err := c.SyncOut(now+sec, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b2 wire.Batch
	if err := b2.UnmarshalMsg(next); err != nil || b2.Isolate != "iso-1~2" || b2.Secret != secret2 || b2.Seq != 2 {
		t.Fatalf("next batch %+v, %v; want seq 2 of iso-1~2", b2, err)
	}
}

// TestReincarnateIdle: without an outstanding batch the next cut is seq 1
// of the new id; bad ids are refused and change nothing.
func TestReincarnateIdle(t *testing.T) {
	c := mustCore(t, approxCfg("iso-1", wire.FixedWindow, 100, 60*sec))
	for _, bad := range []string{"", "iso-1", strings.Repeat("x", wire.MaxIsolateIDLen+1)} {
		if err := c.Reincarnate(bad, ""); !errors.Is(err, core.ErrBadInput) || core.Code(err) != core.Code(core.ErrBadInput) {
			t.Errorf("Reincarnate(%q) = %v, want ErrBadInput", bad, err)
		}
	}
	if err := c.Reincarnate("iso-2", "short"); !errors.Is(err, core.ErrBadInput) {
		t.Errorf("Reincarnate with a 5-byte secret = %v, want ErrBadInput", err)
	}
	if err := c.Reincarnate("iso-2", ""); err != nil {
		t.Fatal(err)
	}
	var r core.Result
	if err := c.Decide(0, []byte("k"), 1, sec, &r); err != nil {
		t.Fatal(err)
	}
	out, err := c.SyncOut(sec, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b wire.Batch
	if err := b.UnmarshalMsg(out); err != nil || b.Isolate != "iso-2" || b.Seq != 1 {
		t.Fatalf("batch %+v, %v", b, err)
	}
	noID := mustCore(t, approxCfg("", wire.FixedWindow, 100, 60*sec))
	if err := noID.Reincarnate("x", ""); !errors.Is(err, core.ErrNoIsolateID) {
		t.Fatalf("Reincarnate without an id: %v", err)
	}
}
