package coordinator

import (
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Reserved reads a window's count and the budget leased out for it,
// changing nothing; buckets, unknown limiters and uncached keys say !ok.
func TestReserved(t *testing.T) {
	c, _ := newTestCoordinator(t, t0, nil)
	W := t0 / sec
	rp := mustSync(t, c, batch("a", 1, t0,
		wire.Delta{Limiter: "sfw", Key: "k", Window: W, Delta: 3, Demand: 10},
		wire.Delta{Limiter: "fw", Key: "k", Window: W, Delta: 7, Demand: 7}))
	lease := viewOf(t, rp, "sfw", "k").Lease
	if lease <= 0 {
		t.Fatalf("no lease granted: %d", lease)
	}
	c.withMerger(func(m *merge.Merger) {
		cached := m.CachedKeys()
		if cnt, res, ok := m.Reserved("sfw", "k", W, t0); !ok || cnt != 3 || res < lease {
			t.Errorf("strict: count %d, reserved %d, ok %v; want 3, >= the lease %d", cnt, res, ok, lease)
		}
		if cnt, res, ok := m.Reserved("fw", "k", W, t0); !ok || cnt != 7 || res != 0 {
			t.Errorf("approximate: count %d, reserved %d, ok %v; want 7, 0", cnt, res, ok)
		}
		if cnt, _, ok := m.Reserved("sfw", "k", W+5, t0); !ok || cnt != 0 {
			t.Errorf("a later window: count %d, ok %v; want 0", cnt, ok)
		}
		for _, q := range [][2]string{{"stb", "k"}, {"nope", "k"}, {"sfw", "never-synced"}} {
			if _, _, ok := m.Reserved(q[0], q[1], W, t0); ok {
				t.Errorf("Reserved(%q, %q) ok", q[0], q[1])
			}
		}
		if m.CachedKeys() != cached {
			t.Errorf("Reserved loaded keys: %d cached, was %d", m.CachedKeys(), cached)
		}
	})
}
