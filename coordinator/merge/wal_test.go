package merge

import (
	"errors"
	"fmt"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// countRecords counts the store's records with prefix p.
func countRecords(t *testing.T, s Store, p byte) int {
	t.Helper()
	n := 0
	if err := s.Scan([]byte{p}, nil, func(k, v []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

func newWALMerger(t *testing.T, s Store, opts MergerOptions) *Merger {
	t.Helper()
	m, err := NewMerger(testConfig(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A group commit writes one log record however many keys it touched; a
// Merger opened on the store after a crash (no checkpoint) replays the log
// and sees every committed count; a checkpoint writes the records and
// empties the log.
func TestLogReplayAfterCrashAndCheckpoint(t *testing.T) {
	s, err := openMemStore()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	never := MergerOptions{CheckpointKeys: 1 << 30, CheckpointInterval: 1 << 62}
	m := newWALMerger(t, s, never)
	batchN := func(seq int64) *wire.Batch {
		var es []wire.Delta
		for k := 0; k < 50; k++ {
			es = append(es, wire.Delta{Limiter: "fw", Key: fmt.Sprintf("k%d", k), Window: 1000, Delta: seq})
		}
		return batch("a", seq, t0, es...)
	}
	for seq := int64(1); seq <= 3; seq++ {
		if _, err := m.Apply(batchN(seq), t0); err != nil {
			t.Fatal(err)
		}
		if err := m.Commit(t0); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRecords(t, s, prefixLog); n != 3 {
		t.Fatalf("%d log records after 3 commits, want 3", n)
	}
	if n := countRecords(t, s, prefixKey); n != 0 {
		t.Fatalf("%d key records before any checkpoint", n)
	}
	// "Crash": a new Merger on the same store.
	m2 := newWALMerger(t, s, never)
	if m2.Stats().Replayed != 3 || countRecords(t, s, prefixLog) != 0 || countRecords(t, s, prefixKey) != 50 {
		t.Fatalf("replayed %d, %d log and %d key records left", m2.Stats().Replayed,
			countRecords(t, s, prefixLog), countRecords(t, s, prefixKey))
	}
	ks, err := m2.KeyState("fw", "k7", t0)
	if err != nil || ks.Count != 6 {
		t.Fatalf("k7 after replay: %+v, %v (want count 1+2+3)", ks, err)
	}
	// The high-water mark came back too (with the batch's digest): a retry
	// of seq 3 is a duplicate, another batch numbered 3 a conflict.
	if _, err := m2.Apply(batchN(3), t0); err != nil {
		t.Fatal(err)
	}
	var se *SeqError
	if _, err := m2.Apply(batch("a", 3, t0, wire.Delta{Limiter: "fw", Key: "k7", Window: 1000, Delta: 3}), t0); !errors.As(err, &se) || se.Anomaly != SeqConflict {
		t.Fatalf("another batch numbered 3 after replay: %v", err)
	}
	if m2.Stats().Duplicates != 1 {
		t.Fatal("retry after replay applied again")
	}
	// A checkpoint writes the logged states and deletes the log.
	if _, err := m2.Apply(batch("a", 4, t0, wire.Delta{Limiter: "fw", Key: "k7", Window: 1000, Delta: 10}), t0); err != nil {
		t.Fatal(err)
	}
	if err := m2.Commit(t0); err != nil {
		t.Fatal(err)
	}
	ck := m2.Checkpoint(t0)
	ops, err := ck.Ops()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ops); err != nil {
		t.Fatal(err)
	}
	m2.checkpointed(ck, nil)
	if countRecords(t, s, prefixLog) != 0 || countRecords(t, s, prefixHWM) != 1 {
		t.Fatalf("after the checkpoint: %d log records (want 0), %d high-water marks (want 1)",
			countRecords(t, s, prefixLog), countRecords(t, s, prefixHWM))
	}
	v, found, err := s.Get([]byte(keyStorageKey("fw", "k7")))
	var st keyState
	if err != nil || !found || st.decode(v, 8) != nil || st.count != 16 {
		t.Fatalf("k7 record after checkpoint: count %d (found %v, %v), want 16", st.count, found, err)
	}
}

// A checkpoint that fails to commit changes nothing in the store; the next
// one covers its log records again, so a later crash loses nothing.
func TestFailedCheckpointIsRetried(t *testing.T) {
	inner, err := openMemStore()
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	fs := &flakyStore{Store: inner}
	m := newWALMerger(t, fs, MergerOptions{CheckpointKeys: 1, CheckpointInterval: 1 << 62})
	apply := func(seq int64, key string) {
		if _, err := m.Apply(batch("a", seq, t0, wire.Delta{Limiter: "fw", Key: key, Window: 1000, Delta: 1}), t0); err != nil {
			t.Fatal(err)
		}
		ops, gen := m.stage()
		if err := fs.Commit(ops); err != nil {
			t.Fatal(err)
		}
		m.committed(gen, nil)
	}
	apply(1, "x")
	ck := m.Checkpoint(t0)
	fs.failing.Store(true)
	ops, _ := ck.Ops()
	err = fs.Commit(ops)
	fs.failing.Store(false)
	if err == nil {
		t.Fatal("flaky store did not fail")
	}
	m.checkpointed(ck, err)
	if !m.CheckpointDue(t0) {
		t.Fatal("no checkpoint due after a failed one")
	}
	apply(2, "y")
	if err := m.Commit(t0); err != nil { // checkpoints
		t.Fatal(err)
	}
	if countRecords(t, fs, prefixLog) != 0 {
		t.Fatal("log left after the retried checkpoint")
	}
	for _, k := range []string{"x", "y"} {
		if _, found, _ := fs.Get([]byte(keyStorageKey("fw", k))); !found {
			t.Fatalf("%s: no record after the retried checkpoint", k)
		}
	}
}

// A corrupt log record stops the Merger from opening rather than silently
// losing counts.
func TestCorruptLogRefusesToOpen(t *testing.T) {
	s, err := openMemStore()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Commit([]Op{{Key: logKey(1), Value: []byte{'s', 200}}}); err != nil {
		t.Fatal(err)
	}
	_, err = NewMerger(testConfig(), s, MergerOptions{})
	if !errors.Is(err, errCorrupt) {
		t.Fatalf("NewMerger over a corrupt log: %v", err)
	}
}

// FuzzWalkLog runs the log record decoder (what a restart reads back) on
// arbitrary bytes: it must never panic, and the ops of every record it
// accepts must re-encode to a record with the same ops.
func FuzzWalkLog(f *testing.F) {
	set, _ := appendLogSet(nil, "kfwk", []byte{1, 2, 3})
	f.Add(appendLogDelete(set, []byte("hiso")))
	f.Add([]byte{'s', 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{'d'})
	read := func(rec []byte) ([]string, []byte, error) {
		var ops []string
		var out []byte
		err := walkLog(rec, func(k, v []byte, del bool) {
			ops = append(ops, fmt.Sprintf("%q %q %v", k, v, del))
			if del {
				out = appendLogDelete(out, k)
			} else {
				out, _ = appendLogSet(out, k, v)
			}
		})
		return ops, out, err
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		ops, out, err := read(rec)
		if err != nil {
			return
		}
		again, _, err := read(out)
		if err != nil || fmt.Sprint(again) != fmt.Sprint(ops) {
			t.Fatalf("ops %v re-read as %v (%v)", ops, again, err)
		}
	})
}
