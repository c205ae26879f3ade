package sim

import (
	"testing"
	"time"
)

// Past the coordinator's MaxIsolatesPerKey (256 by default) isolates of one
// key take each other's entries, whose leases are counted as spent and,
// when their isolates report, again: 500 isolates at twice a limit of
// 1000/s reach about 90% of it. Simulator.MaxIsolatesPerKey (the
// coordinator's --max-isolates-per-key) raised past the fleet serves it
// (the shipped scenario many-isolates: 89.5% and 99.5%).
func TestMaxIsolatesPerKeyServesALargerFleet(t *testing.T) {
	sc := manyIsolates(t)
	util := map[int]float64{}
	for _, n := range []int{0, 512} {
		s, err := New(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		s.MaxIsolatesPerKey = n
		r, err := s.Run(t.Context(), sc, Auto, 100*time.Millisecond, 1, nil)
		s.Close(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r.WorstOverrun != 0 {
			t.Fatalf("max isolates per key %d: a window %d over", n, r.WorstOverrun)
		}
		util[n] = r.Utilisation
	}
	t.Logf("500 isolates on one key: utilisation %.1f%% (256 per key), %.1f%% (512)", util[0], util[512])
	if util[0] > 95 || util[512] < 98 {
		t.Errorf("utilisation %.1f%% at the default and %.1f%% at 512 per key: want under 95%% and at least 98%%", util[0], util[512])
	}
}
