package merge

import (
	"errors"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestReincarnationHandsLeasesOver runs coordtest.Handover (a
// reincarnation after the isolate's mark rolled back) on a Merger over a
// store in memory, restarted from its store after the roll back: every
// lease of the old incarnation is handed over (before, each stayed
// reserved as spent for the rest of its hour), in strict and auto, fixed
// and sliding windows, also when the batch refused is a graceful stop's
// last (resent as the new incarnation's, still the last: before, it was
// resent as an ordinary batch naming no predecessor, and the stop gave
// nothing back); with a wrong predecessor secret nothing moves.
func TestReincarnationHandsLeasesOver(t *testing.T) {
	for _, tc := range []struct {
		name, alg, mode string
		c               coordtest.HandoverCase
	}{
		{"strict-fixed", wire.FixedWindow, wire.Strict, coordtest.HandoverCase{}},
		{"strict-sliding", wire.SlidingWindow, wire.Strict, coordtest.HandoverCase{}},
		{"auto-fixed", wire.FixedWindow, wire.Auto, coordtest.HandoverCase{}},
		{"at-stop", wire.FixedWindow, wire.Strict, coordtest.HandoverCase{AtStop: true}},
		{"wrong-secret", wire.FixedWindow, wire.Strict, coordtest.HandoverCase{BadSecret: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := coordtest.HandoverConfig(tc.alg, tc.mode)
			store := newMemStore()
			tc0, clk := newTestCoordinator(t, coordtest.HandoverStart(), func(o *testOptions) { o.Config, o.Store = cfg, store })
			cur := tc0
			var mark []byte
			checkpoint := func() {
				if err := cur.Checkpoint(t.Context()); err != nil { // the marks go to the store
					t.Fatal(err)
				}
			}
			rig := coordtest.HandoverRig{
				Syncer: func() coordtest.Syncer { return cur },
				Now:    clk.now,
				Step:   func() int64 { return clk.add(10 * 1e6) },
				SaveMark: func() {
					checkpoint()
					var found bool
					if mark, found, _ = store.Get([]byte(hwmStorageKey("A"))); !found {
						t.Fatal("no mark of A in the store after a checkpoint")
					}
				},
				RollBack: func() {
					checkpoint()
					store.Commit([]Op{{Key: []byte(hwmStorageKey("A")), Value: mark}})
					cur, _ = newTestCoordinator(t, clk.now(), func(o *testOptions) { o.Config, o.Store, o.Clock = cfg, store, tc0.opts.Clock })
				},
				SeqError: func(err error) bool { return errors.Is(err, ErrSequence) },
				Stats:    func() (int64, int64) { s := cur.m.Stats(); return s.Handovers, s.HandoversRefused },
			}
			coordtest.Handover(t, rig, cfg, tc.c)
		})
	}
}

// failingMarkStore fails every read of one isolate's high-water mark.
type failingMarkStore struct {
	*memStore
	mark string
}

func (s *failingMarkStore) Get(key []byte) ([]byte, bool, error) {
	if string(key) == s.mark {
		return nil, false, errDiskFull
	}
	return s.memStore.Get(key)
}

// TestPredecessorReadFailureRefusesTheBatch: a batch naming a predecessor
// whose mark cannot be read is refused (an error: the isolate resends it),
// not taken as naming none, which would end the handover at the module
// and strand the predecessor's leases for their windows.
func TestPredecessorReadFailureRefusesTheBatch(t *testing.T) {
	store := &failingMarkStore{memStore: newMemStore(), mark: hwmStorageKey("A")}
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) { o.Store = store })
	b := batch("A~1", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: clk.now() / sec, Delta: 1, Demand: 1})
	b.Prev, b.PrevSecret = "A", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	if _, err := c.Sync(t.Context(), b); !errors.Is(err, errDiskFull) {
		t.Fatalf("a batch whose predecessor's mark cannot be read: %v, want the read's error", err)
	}
	if s := c.m.Stats(); s.HandoversRefused != 0 || s.Batches != 0 {
		t.Fatalf("stats %+v: want nothing applied, no predecessor refused", s)
	}
	store.mark = "" // the store answers again: the resend is applied (A unknown: nothing to move)
	mustSync(t, c, b)
	if s := c.m.Stats(); s.HandoversRefused != 1 || s.Batches != 1 {
		t.Fatalf("stats %+v after the resend: want it applied, its unknown predecessor refused", s)
	}
}

// TestRefusedHandoverCountedOncePerBatch: a batch naming a predecessor it
// cannot prove (an id never seen, then one whose secret is wrong) counts
// one refused handover (the metric lease_handovers_refused_total), however
// many keys it carries. Over a shared store each bucket's part of the
// batch is applied apart, and each counted it: 16 keys over several
// buckets read as several refused batches (TestOnSharedStore runs it
// there).
func TestRefusedHandoverCountedOncePerBatch(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	w := clk.now() / sec
	entries := func() []wire.Delta {
		var es []wire.Delta
		for i := range 16 {
			es = append(es, wire.Delta{Limiter: "sfw", Key: "k" + string(rune('a'+i)), Window: w, Delta: 1, Demand: 1})
		}
		return es
	}
	old := batch("old", 1, clk.now(), entries()...)
	old.Secret = "the-old-isolate-secret-0123456789"
	mustSync(t, c, old)
	for i, prev := range []struct{ id, secret string }{{"ghost", "any-secret-0123456789abcdef"}, {"old", "not-the-old-isolate-secret-01234"}} {
		clk.add(10 * 1e6)
		b := batch("new"+string(rune('0'+i)), 1, clk.now(), entries()...)
		b.Secret, b.Prev, b.PrevSecret = "the-new-isolate-secret-012345678", prev.id, prev.secret
		mustSync(t, c, b)
		if s := c.m.Stats(); s.HandoversRefused != int64(i+1) || s.Handovers != 0 {
			t.Fatalf("after %d batches naming %q: %d handovers refused, %d made; want %d and 0", i+1, prev.id, s.HandoversRefused, s.Handovers, i+1)
		}
	}
}
