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
// and sliding windows; with a wrong predecessor secret nothing moves.
func TestReincarnationHandsLeasesOver(t *testing.T) {
	for _, tc := range []struct {
		name, alg, mode string
		badSecret       bool
	}{
		{"strict-fixed", wire.FixedWindow, wire.Strict, false},
		{"strict-sliding", wire.SlidingWindow, wire.Strict, false},
		{"auto-fixed", wire.FixedWindow, wire.Auto, false},
		{"wrong-secret", wire.FixedWindow, wire.Strict, true},
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
			coordtest.Handover(t, rig, cfg, tc.badSecret)
		})
	}
}
