package merge

import (
	"fmt"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestReplyWithinBatchBounds: a batch may hold wire.MaxBatchEntries
// entries and as many asks and signals, each for other keys; its reply
// still holds at most wire.MaxBatchEntries views and upstream views, which
// is what the module reads (a longer reply is refused whole, and the
// batch, resent, gets the same reply again). The keys left out are told
// with a later reply.
func TestReplyWithinBatchBounds(t *testing.T) {
	cfg := upCfg()
	cfg.Limiters = append(cfg.Limiters, wire.LimiterConfig{Name: "s", Algorithm: wire.FixedWindow, Limit: 1e6, Period: 1e9, Mode: wire.Strict})
	m, err := NewMerger(cfg, newMemStore(), MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1000e9)
	w := now / 1e9
	n := wire.MaxBatchEntries
	b := &wire.Batch{Version: wire.Version, Isolate: "x", Seq: 1, At: now}
	for i := range n {
		b.Entries = append(b.Entries, wire.Delta{Limiter: "llm", Key: fmt.Sprintf("e%d", i), Window: w, Delta: 1, Demand: 1})
		b.Asks = append(b.Asks, wire.Ask{Limiter: "s", Key: fmt.Sprintf("a%d", i), Window: w, Cost: 1})
		b.Signals = append(b.Signals, wire.Signal{Limiter: "llm", Key: fmt.Sprintf("u%d", i), Pause: 1e9})
	}
	// Every entry's key has upstream state too.
	for i := range n {
		b.Signals[i].Key = fmt.Sprintf("e%d", i)
	}
	if _, err := m.Apply(b, now); err != nil {
		t.Fatal(err)
	}
	b2 := &wire.Batch{Version: wire.Version, Isolate: "x", Seq: 2, At: now, Entries: b.Entries, Asks: b.Asks}
	for i := range n {
		b2.Signals = append(b2.Signals, wire.Signal{Limiter: "llm", Key: fmt.Sprintf("u%d", i), Pause: 1e9})
	}
	rp, err := m.Apply(b2, now)
	if err != nil {
		t.Fatal(err)
	}
	var back wire.Reply
	if err := back.UnmarshalMsg(rp.AppendMsg(nil)); err != nil {
		t.Fatalf("the reply (%d views, %d upstream views) does not decode: %v", len(rp.Entries), len(rp.Upstream), err)
	}
	if len(back.Entries) != n || len(back.Upstream) != n {
		t.Fatalf("%d views, %d upstream views, want %d each (the batch's entries first)", len(back.Entries), len(back.Upstream), n)
	}
}
