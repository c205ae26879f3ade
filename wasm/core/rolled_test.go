//go:build !wasip1

package core_test

import (
	"errors"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A host's clock jumps 30 s forward (3 windows of 10 s) with a unit
// admitted and not yet cut: the first call after the jump rolls the key 3
// windows on (a decision, or the next cut, with another key's unit), the
// batch cut then is refused for its times, the host steps back at the
// refusal's reading and takes the batch back (Recall). Every unit admitted is then counted in
// the coordinator's window, the one before the jump included. A first
// version dropped it at the roll: 9 of 10 counted (an edge host counted 28
// of 29 in CI). A key whose window truly passed (no step) reports nothing
// of what the roll dropped.
func TestClockJumpKeepsThePendingCostARollDropped(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso", Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 1000, Period: 10 * sec}}}
	const ahead = 30 * sec
	t0 := 100_000*sec + 1*sec // the coordinator's time, 1 s into a window
	for _, tc := range []struct {
		name      string
		decide    bool  // decisions on k after the jump (else only the next cut rolls k)
		step      int64 // the step the host tells (0: none, the window passed)
		wantCount int64
	}{
		{"decisions after the jump", true, -ahead, 10},
		{"a cut after the jump", false, -ahead, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, c := retimeIsolate(t, cfg)
			var r core.Result
			admitted := int64(0)
			decide := func(at int64) {
				if err := c.Decide(0, []byte("k"), 1, at, &r); err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					admitted++
				}
			}
			// sync cuts a batch at (host's clock) and has the coordinator
			// apply it at coord (its clock).
			sync := func(at, coord int64) error {
				o := out(t)(c.SyncOut(at, nil))
				if len(o) == 0 {
					t.Fatalf("no batch cut at %d", at)
				}
				rp, err := m.Apply(decodeBatch(t, o), coord)
				if err != nil {
					return err
				}
				if err := m.Commit(coord); err != nil {
					t.Fatal(err)
				}
				return c.SyncIn(rp.AppendMsg(nil), at+1e6)
			}
			for i := int64(0); i < 5; i++ {
				decide(t0 + i*30e6)
			}
			if err := sync(t0+100e6, t0+100e6); err != nil {
				t.Fatal(err)
			}
			decide(t0 + 130e6) // pending when the clock jumps
			if tc.decide {
				for i := int64(0); i < 4; i++ {
					decide(t0 + ahead + 140e6 + i)
				}
			} else if err := c.Decide(0, []byte("z"), 1, t0+ahead+140e6, &r); err != nil || !r.Allowed {
				t.Fatal(r, err) // another key's unit: the batch that brings the refusal
			}
			if err := sync(t0+ahead+200e6, t0+200e6); !errors.Is(err, merge.ErrClockSkew) {
				t.Fatalf("the batch cut 30 s ahead: %v, want merge.ErrClockSkew", err)
			}
			c.ClockOffset(tc.step)
			if err := c.Recall(t0+210e6, true); err != nil {
				t.Fatal(err)
			}
			if err := sync(t0+210e6, t0+210e6); err != nil {
				t.Fatal(err)
			}
			ks, err := m.KeyState("a", "k", t0+300e6)
			if err != nil {
				t.Fatal(err)
			}
			if ks.Count != admitted || admitted != tc.wantCount {
				t.Fatalf("the coordinator counts %d of %d admitted (want %d)", ks.Count, admitted, tc.wantCount)
			}
		})
	}
	t.Run("the window passed", func(t *testing.T) {
		m, c := retimeIsolate(t, cfg)
		var r core.Result
		for i := int64(0); i < 3; i++ {
			if err := c.Decide(0, []byte("k"), 1, t0+i, &r); err != nil || !r.Allowed {
				t.Fatal(r, err)
			}
		}
		// Nothing synced for 30 s (the coordinator out of reach): the
		// next decision is 3 windows on, and its batch names it alone.
		if err := c.Decide(0, []byte("k"), 1, t0+ahead, &r); err != nil || !r.Allowed {
			t.Fatal(r, err)
		}
		b := decodeBatch(t, out(t)(c.SyncOut(t0+ahead+1e6, nil)))
		if len(b.Entries) != 1 || b.Entries[0].Delta != 1 || b.Entries[0].Window != (t0+ahead)/(10*sec) {
			t.Fatalf("batch %+v, want the one unit of the window now", b.Entries)
		}
		if _, err := m.Apply(b, t0+ahead+2e6); err != nil {
			t.Fatal(err)
		}
	})
}
