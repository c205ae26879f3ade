package coordinator

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A prefetched record that went stale (the key was loaded, changed,
// committed and evicted after the prefetch) must not be used.
func TestPrefetchStaleAfterEviction(t *testing.T) {
	store, err := OpenPebble("", true)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMerger(testConfig(), store, MergerOptions{MaxCachedKeys: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m.EnablePrefetch()
	now := 1000 * sec
	d := func(key string, delta int64) wire.Delta {
		return wire.Delta{Limiter: "fw", Key: key, Window: 1000, Delta: delta}
	}
	pfA := m.Prefetch(batch("a", 1, now, d("k", 1))) // reads "k": not found
	if pfA == nil || !pfA.ents[0].read || pfA.ents[0].found {
		t.Fatalf("prefetch: %+v", pfA)
	}
	for _, b := range []*wire.Batch{batch("b", 1, now, d("k", 5)), batch("b", 2, now, d("other", 1))} {
		if _, err := m.Apply(b, now); err != nil {
			t.Fatal(err)
		}
		if err := m.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if _, cached := m.keys[keyStorageKey("fw", "k")]; cached {
		t.Fatal("k still cached; the test needs it evicted")
	}
	rp, err := m.ApplyPrefetched(batch("a", 1, now, d("k", 1)), now, pfA)
	if err != nil {
		t.Fatal(err)
	}
	if got := rp.Entries[0].Count; got != 6 {
		t.Fatalf("count %d after a stale prefetch, want 6", got)
	}

	// A fresh prefetch of an evicted key is used and correct.
	if _, err := m.Apply(batch("b", 3, now, d("other2", 1)), now); err != nil {
		t.Fatal(err)
	}
	if err := m.Commit(); err != nil {
		t.Fatal(err)
	}
	pf := m.Prefetch(batch("a", 2, now, d("k", 1)))
	if pf == nil || !pf.ents[0].found {
		t.Fatalf("prefetch of evicted k: %+v", pf)
	}
	if _, ok := m.prefetched(pf, 0); !ok {
		t.Fatal("current prefetch not usable")
	}
	rp, err = m.ApplyPrefetched(batch("a", 2, now, d("k", 1)), now, pf)
	if err != nil {
		t.Fatal(err)
	}
	if got := rp.Entries[0].Count; got != 7 {
		t.Fatalf("count %d, want 7", got)
	}
}
