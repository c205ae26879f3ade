package wire_test

import (
	"os"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A reply written before reset notices and limit lives (UpViews of 7
// elements, no rg) still decodes: no life, no generation.
func TestReplyBeforeResetNoticesDecodes(t *testing.T) {
	b, err := os.ReadFile("testdata/reply_upstream_7.msgpack")
	if err != nil {
		t.Fatal(err)
	}
	var rp wire.Reply
	if err := rp.UnmarshalMsg(b); err != nil {
		t.Fatalf("an older reply is refused: %v", err)
	}
	if len(rp.Upstream) != 3 || rp.Upstream[0].Limit != 6 || rp.Upstream[0].Life != 0 || rp.ResetGen != 0 || rp.ResetAll || rp.Resets != nil {
		t.Fatalf("decoded %+v", rp)
	}
	// An UpView without a life is written as the 7 elements older
	// modules read.
	v := wire.UpView{Limiter: "a", Key: "k", Limit: 3}
	if got := v.AppendMsg(nil)[0]; got != 0x97 {
		t.Fatalf("an UpView without a life has header %#x, want 0x97 (7 elements)", got)
	}
}

// A batch's reset generation round-trips; a negative one is refused.
func TestBatchResetGen(t *testing.T) {
	b := wire.Batch{Version: wire.Version, Isolate: "i", Seq: 2, At: 5, ResetGen: 42}
	var got wire.Batch
	if err := got.UnmarshalMsg(b.AppendMsg(nil)); err != nil || got.ResetGen != 42 {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	b.ResetGen = -1
	if err := b.Validate(); err == nil {
		t.Fatal("a negative reset generation was accepted")
	}
}
