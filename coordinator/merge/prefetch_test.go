package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A prefetched record that went stale (the key was loaded, changed,
// committed and evicted after the prefetch) must not be used.
func TestPrefetchStaleAfterEviction(t *testing.T) {
	store, err := openMemStore()
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
	seqB := int64(0)
	apply := func(key string, delta int64) {
		seqB++
		if _, err := m.Apply(batch("b", seqB, now, d(key, delta)), now); err != nil {
			t.Fatal(err)
		}
		if err := m.Commit(now); err != nil {
			t.Fatal(err)
		}
	}
	// evictK touches other keys until "k" is evicted (which of the keys over
	// the cap goes is random).
	evictK := func() {
		for i := 0; ; i++ {
			if _, cached := m.keys[keyStorageKey("fw", "k")]; !cached {
				return
			}
			if i == 1000 {
				t.Fatal("k never evicted")
			}
			apply("other-"+string(rune('a'+i%26))+string(rune('a'+i/26)), 1)
		}
	}
	apply("k", 5)
	evictK()
	rp, err := m.ApplyPrefetched(batch("a", 1, now, d("k", 1)), now, pfA)
	if err != nil {
		t.Fatal(err)
	}
	if got := rp.Entries[0].Count; got != 6 {
		t.Fatalf("count %d after a stale prefetch, want 6", got)
	}

	// A fresh prefetch of an evicted key is used and correct.
	evictK()
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
