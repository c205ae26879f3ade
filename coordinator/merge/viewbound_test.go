package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestViewBoundedAfterHugeCost: after one isolate reports a cost of 2^40
// on a key of each kind, another isolate's view of it says no more than
// viewOvercommit times the limit (windowed) or a TAT viewRefills burst
// refills ahead (buckets), values the module takes (within 2^20 times the
// limit, 60 s plus 64 times the limit's periods), while the key keeps
// every unit reported.
func TestViewBoundedAfterHugeCost(t *testing.T) {
	m, err := NewMerger(testConfig(), newMemStore(), MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := t0 / sec
	const huge = 1 << 40
	lims := []string{"fw", "sw", "sfw", "ssw", "tb", "gcra", "stb"}
	var evil, honest []wire.Delta
	for _, l := range lims {
		win := w
		if l == "tb" || l == "gcra" || l == "stb" {
			win = 0
		}
		evil = append(evil, wire.Delta{Limiter: l, Key: "k", Window: win, Delta: huge, Demand: huge})
		honest = append(honest, wire.Delta{Limiter: l, Key: "k", Window: win, Delta: 1, Demand: 1})
	}
	if _, err := m.Apply(batch("evil", 1, t0, evil...), t0); err != nil {
		t.Fatal(err)
	}
	rp, err := m.Apply(batch("honest", 1, t0, honest...), t0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	for _, l := range lims {
		lc := cfg.Limiter(l)
		v := viewOf(t, rp, l, "k")
		ks, err := m.KeyState(l, "k", t0)
		if err != nil {
			t.Fatal(err)
		}
		if lc.IsBucket() {
			if ahead := v.TAT - t0; ahead <= 0 || ahead > viewRefills*lc.EffectiveBurst(lc.Limit)*lc.Period/lc.Limit+1 {
				t.Errorf("%s: view TAT %d ns ahead, want full and at most %d burst refills", l, ahead, viewRefills)
			}
			continue
		}
		if top := lc.Limit * viewOvercommit; v.Count != top || v.Prev != 0 {
			t.Errorf("%s: view count %d prev %d, want %d (the bound) and 0", l, v.Count, v.Prev, top)
		}
		if ks.Count < huge {
			t.Errorf("%s: the key holds %d, want every unit reported (>= 2^40)", l, ks.Count)
		}
	}
}

// TestFullNoticeBounded: a full-window notice, the view of a key another
// isolate's batch did not name, is bounded like any view. One client
// reporting a cost of 2^40 on a key of its own choosing, 20 times a
// second, had every other isolate of the limiter refuse every reply (its
// notices carried the stored count; the module takes at most 2^20 times
// the limit): their batches were never acknowledged, their edges stale
// and their fail policies deciding for as long as it lasted.
func TestFullNoticeBounded(t *testing.T) {
	for _, lim := range []string{"fw", "sfw", "sw"} {
		c, _ := newTestCoordinator(t, t0, nil)
		W := t0 / sec
		mustSync(t, c, batch("honest", 1, t0, wire.Delta{Limiter: lim, Key: "mine", Window: W, Delta: 1, Demand: 1}))
		mustSync(t, c, batch("evil", 1, t0, wire.Delta{Limiter: lim, Key: "evil", Window: W, Delta: 1 << 40, Demand: 1 << 40}))
		rp := mustSync(t, c, batch("honest", 2, t0, wire.Delta{Limiter: lim, Key: "mine", Window: W, Delta: 1, Demand: 1}))
		v, ok := fullViews(rp, lim)["evil"]
		if !ok {
			t.Fatalf("%s: no notice of the full key: %+v", lim, rp.Entries)
		}
		cfg := testConfig()
		top := cfg.Limiter(lim).Limit * viewOvercommit
		if v.Count != top || v.Prev > top {
			t.Errorf("%s: notice count %d prev %d, want %d (the bound)", lim, v.Count, v.Prev, top)
		}
	}
}
