package core_test

import (
	"strconv"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestFloodOfUniqueKeys floods the native core with unique keys under a key
// cap: the table stays at the cap, every key beyond it evicts one, the state
// stays under a fixed bound, the keys tracked at the end are the recent ones
// (old state is evicted, not new), and keys used again and again during the
// flood (CLOCK reference bits) are not the ones evicted.
func TestFloodOfUniqueKeys(t *testing.T) {
	total, maxKeys := 1_000_000, 10_000
	if testing.Short() || raceEnabled {
		total = 300_000
	}
	// Hot keys are used every 32 flood keys, warm keys every 2000: both
	// more often than a CLOCK hand comes around a full table of 10,000
	// unreferenced keys, which takes about 10,000 insertions.
	const hot, hotEvery, warm, warmEvery = 16, 32, 16, 2000
	cfg := wire.Config{Version: wire.Version, MaxKeys: int64(maxKeys), Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 1 << 40, Period: wire.MaxPeriod},
	}}
	c := mustCore(t, cfg)
	var r core.Result
	named := func(prefix string, i int) []byte { return []byte(prefix + strconv.Itoa(i)) }
	use := func(k []byte, now int) {
		if err := c.Decide(0, k, 1, int64(now), &r); err != nil {
			t.Fatal(err)
		}
	}
	hotUses, warmUses := 0, 0
	flood := total - hot - warm // every key is unique: total keys in all
	key := make([]byte, 0, 32)
	for i := 0; i < flood; i++ {
		if i%hotEvery == 0 {
			for h := 0; h < hot; h++ {
				use(named("hot-", h), i)
			}
			hotUses++
		}
		if i%warmEvery == 0 {
			for h := 0; h < warm; h++ {
				use(named("warm-", h), i)
			}
			warmUses++
		}
		key = strconv.AppendInt(append(key[:0], "flood-"...), int64(i), 10)
		use(key, i)
		if i%100_000 == 0 {
			if st := c.Stats(); st.Keys > int64(maxKeys) {
				t.Fatalf("after %d keys: %d tracked, cap %d", i, st.Keys, maxKeys)
			}
		}
	}
	st := c.Stats()
	t.Logf("%d keys through a cap of %d: %+v", total, maxKeys, st)
	if st.Keys != int64(maxKeys) {
		t.Errorf("Keys = %d, want the cap %d", st.Keys, maxKeys)
	}
	// Every eviction beyond total-maxKeys would be a hot or warm key
	// evicted and tracked again.
	if st.Evictions != int64(total-maxKeys) {
		t.Errorf("Evictions = %d, want %d: hot or warm keys were evicted", st.Evictions, total-maxKeys)
	}
	// Nothing ever synced: every evicted (flood) key lost its cost of 1.
	if st.EvictedUnsynced != st.Evictions {
		t.Errorf("EvictedUnsynced = %d, want %d", st.EvictedUnsynced, st.Evictions)
	}
	// ~180 bytes per entry, the key bytes, the slots and the dirty list:
	// well under 512 bytes per tracked key, whatever the number of keys seen.
	if bound := int64(maxKeys) * 512; st.StateBytes <= 0 || st.StateBytes > bound {
		t.Errorf("StateBytes = %d, want in (0, %d]", st.StateBytes, bound)
	}
	// The most recent flood keys are all still tracked (peeking a tracked
	// key evicts nothing).
	missing := 0
	for i := flood - maxKeys/2; i < flood; i++ {
		if err := c.Decide(0, named("flood-", i), 0, int64(total), &r); err != nil {
			t.Fatal(err)
		}
		if r.Limit-r.Remaining != 1 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of the last %d flood keys were evicted while older state was kept", missing, maxKeys/2)
	}
	// The hot and warm keys kept (almost) their whole history.
	for _, g := range []struct {
		prefix string
		n      int
		uses   int
	}{{"hot-", hot, hotUses}, {"warm-", warm, warmUses}} {
		for h := 0; h < g.n; h++ {
			if err := c.Decide(0, named(g.prefix, h), 0, int64(total), &r); err != nil {
				t.Fatal(err)
			}
			if used := r.Limit - r.Remaining; used < int64(g.uses)*9/10 {
				t.Errorf("%s%d: %d of %d uses left: evicted during the flood", g.prefix, h, used, g.uses)
			}
		}
	}
	// The oldest flood keys are gone: they come back fresh.
	evictionsBefore := c.Stats().Evictions
	if err := c.Decide(0, []byte("flood-1"), 0, int64(total), &r); err != nil {
		t.Fatal(err)
	}
	if r.Remaining != r.Limit || c.Stats().Evictions != evictionsBefore+1 {
		t.Errorf("flood-1 should have been evicted long ago: remaining %d of %d", r.Remaining, r.Limit)
	}
}

// Keys with nothing left to sync are evicted before keys holding
// unsynced cost.
func TestEvictionPrefersSyncedKeys(t *testing.T) {
	const maxKeys = 1000
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso", MaxKeys: maxKeys, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 100, Period: 3600 * sec},
	}}
	c := mustCore(t, cfg)
	fc := newFakeCoord(t, cfg)
	var r core.Result
	// Fill the table: even keys synced, odd keys with unsynced cost.
	for i := 0; i < maxKeys; i++ {
		if err := c.Decide(0, []byte("old-"+strconv.Itoa(i)), 1, sec, &r); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			fc.sync(c, sec)
		}
	}
	// Odd keys never synced: half the table can go without losing anything.
	for i := 0; i < maxKeys/2; i++ {
		if err := c.Decide(0, []byte("new-"+strconv.Itoa(i)), 0, 2*sec, &r); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	if st.Evictions != maxKeys/2 {
		t.Fatalf("Evictions = %d, want %d", st.Evictions, maxKeys/2)
	}
	if st.EvictedUnsynced != 0 {
		t.Errorf("EvictedUnsynced = %d: unsynced keys were evicted while synced ones were available", st.EvictedUnsynced)
	}
}

func TestDefaultMaxKeys(t *testing.T) {
	c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.FixedWindow, Limit: 1, Period: sec}))
	if got := c.Config().MaxKeys; got != wire.DefaultMaxKeys {
		t.Errorf("MaxKeys defaulted to %d, want %d", got, wire.DefaultMaxKeys)
	}
	// An idle core holds almost nothing.
	if b := c.Stats().StateBytes; b > 64<<10 {
		t.Errorf("idle StateBytes = %d", b)
	}
}
