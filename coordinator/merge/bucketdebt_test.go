package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestApproximateBucketDebtBounded: one batch with a cost of 2^40 on an
// approximate token bucket (10/s, burst 20) and GCRA (1000/s) key left the
// key owing about 3,500 years of refills (the token bucket), so every view
// said empty for good. The stored TAT is held within viewRefills burst
// refills of now (what a view says at most), so the key is full again
// viewRefills refill times later. An honest overrun below that (three
// bursts admitted at once by isolates deciding from the same view) is
// still paid back: the bucket stays empty until it is.
func TestApproximateBucketDebtBounded(t *testing.T) {
	m, err := NewMerger(testConfig(), newMemStore(), MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	const huge = 1 << 40
	ahead := func(l string) int64 { // viewRefills refill times of l's burst, ns
		lc := cfg.Limiter(l)
		return viewRefills * mulDivUp(lc.EffectiveBurst(lc.Limit), lc.Period, lc.Limit)
	}
	for _, l := range []string{"tb", "gcra"} {
		if _, err := m.Apply(batch("evil-"+l, 1, t0, wire.Delta{Limiter: l, Key: "k", Delta: huge, Demand: huge}), t0); err != nil {
			t.Fatal(err)
		}
		ks, err := m.KeyState(l, "k", t0)
		if err != nil {
			t.Fatal(err)
		}
		if ks.TAT > t0+ahead(l) {
			t.Errorf("%s: after a cost of 2^40 the bucket owes until %.0f s from now, want at most %d burst refills (%.0f s)",
				l, float64(ks.TAT-t0)/1e9, viewRefills, float64(ahead(l))/1e9)
		}
		later := t0 + ahead(l) + sec
		rp, err := m.Apply(batch("honest-"+l, 1, later, wire.Delta{Limiter: l, Key: "k"}), later)
		if err != nil {
			t.Fatal(err)
		}
		if v := viewOf(t, rp, l, "k"); v.TAT > later {
			t.Errorf("%s: %d burst refills and 1 s later the view's TAT is %.0f s ahead, want the bucket full (TAT <= now)",
				l, viewRefills, float64(v.TAT-later)/1e9)
		}
	}

	// Honest overrun: three isolates each admit tb's burst (20) from the
	// same view of a full bucket: 60 units, 40 past empty, paid back
	// over 4 s more than the 2 s a burst takes to refill.
	var seq int64 = 1
	for _, iso := range []string{"a", "b", "c"} {
		if _, err := m.Apply(batch(iso, seq, t0, wire.Delta{Limiter: "tb", Key: "o", Delta: 20, Demand: 20}), t0); err != nil {
			t.Fatal(err)
		}
	}
	ks, err := m.KeyState("tb", "o", t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0 + 6*sec; ks.TAT != want {
		t.Fatalf("tb after 60 units at once: TAT %.3f s ahead, want 6 s (the overrun kept)", float64(ks.TAT-t0)/1e9)
	}
}
