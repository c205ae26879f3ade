package coordinator

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The commit protocol through Ready and Advance, as a pipelining caller
// drives it: a stage written and advanced, a due checkpoint written from
// the Ready, a failed stage that makes the Merger replay the log, and what
// a reopened store holds.
func TestReadyAdvance(t *testing.T) {
	dir := t.TempDir()
	store, err := pebblestore.Open(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := merge.NewMerger(testConfig(), store, merge.MergerOptions{CheckpointKeys: 1})
	if err != nil {
		t.Fatal(err)
	}
	lim := testConfig().Limiters[0].Name
	t0 := int64(1000e9)
	batch := func(seq, delta int64) *wire.Batch {
		return &wire.Batch{Version: wire.Version, Isolate: "a", Seq: seq, At: t0,
			Entries: []wire.Delta{{Limiter: lim, Key: "k", Window: t0 / testConfig().Limiters[0].Period, Delta: delta, Demand: delta}}}
	}
	if _, err := m.Apply(batch(1, 3), t0); err != nil {
		t.Fatal(err)
	}
	rd := m.Ready(t0, false)
	if len(rd.Ops) == 0 || rd.Checkpoint == nil {
		t.Fatalf("first Ready: %d ops, checkpoint %v; want a stage and a due checkpoint", len(rd.Ops), rd.Checkpoint)
	}
	if again := m.Ready(t0, true); len(again.Ops) != 0 || again.Checkpoint != nil {
		t.Fatalf("nothing applied since, checkpoint in flight: %+v", again)
	}
	m.Advance(merge.Done{Gen: rd.Gen, Err: store.Commit(rd.Ops)})
	ops, err := rd.Checkpoint.Ops()
	if err != nil {
		t.Fatal(err)
	}
	m.Advance(merge.Done{Checkpoint: rd.Checkpoint, Err: store.Commit(ops)})

	// A failed stage: the Merger drops what it staged and replays the log.
	if _, err := m.Apply(batch(2, 4), t0); err != nil {
		t.Fatal(err)
	}
	rd = m.Ready(t0, false)
	m.Advance(merge.Done{Gen: rd.Gen, Err: errors.New("disk full (test)")})
	if !m.NeedsRecovery() {
		t.Fatal("a failed stage does not make the merge.Merger replay the log")
	}
	if ks, err := m.KeyState(lim, "k", t0); err != nil || ks.Count != 3 {
		t.Fatalf("after the failed stage: %+v %v, want the committed count 3", ks, err)
	}
	store.Close()

	store, err = pebblestore.Open(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m, err = merge.NewMerger(testConfig(), store, merge.MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ks, err := m.KeyState(lim, "k", t0); err != nil || ks.Count != 3 {
		t.Fatalf("reopened: %+v %v, want 3", ks, err)
	}
}
