package merge

import (
	"bytes"
	"slices"
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

// sortedStore is a memStore that reads many keys at once (SortedGetter),
// checking they come in ascending order, and counts the calls.
type sortedStore struct {
	*memStore
	t     *testing.T
	calls int
}

func (s *sortedStore) GetSorted(keys [][]byte, fn func(i int, value []byte, found bool)) error {
	s.calls++
	for i, k := range keys {
		if i > 0 && bytes.Compare(keys[i-1], k) > 0 {
			s.t.Fatalf("GetSorted: %q after %q", k, keys[i-1])
		}
		v, ok, _ := s.Get(k)
		fn(i, v, ok)
	}
	return nil
}

// Prefetch reads a batch's cold keys with one GetSorted when the store has
// it, and each entry gets its own key's record (unsorted entries, a key
// twice, two limiters).
func TestPrefetchSorted(t *testing.T) {
	store := &sortedStore{memStore: newMemStore(), t: t}
	m, err := NewMerger(testConfig(), store, MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.EnablePrefetch()
	now := 1000 * sec
	d := func(lim, key string, delta int64) wire.Delta {
		return wire.Delta{Limiter: lim, Key: key, Window: 1000, Delta: delta}
	}
	if _, err := m.Apply(batch("a", 1, now, d("fw", "b", 2), d("fw", "d", 4), d("sfw", "a", 7)), now); err != nil {
		t.Fatal(err)
	}
	if err := m.Commit(now); err != nil {
		t.Fatal(err)
	}
	m.dropCache() // every key cold again
	b := batch("a", 2, now, d("fw", "z", 1), d("fw", "d", 1), d("sfw", "a", 1), d("fw", "b", 1), d("fw", "d", 1))
	pf := m.Prefetch(b)
	if pf == nil || store.calls != 1 {
		t.Fatalf("prefetch: %+v, %d GetSorted calls", pf, store.calls)
	}
	for i, e := range b.Entries {
		want, found, _ := store.Get([]byte(keyStorageKey(e.Limiter, e.Key)))
		got := pf.ents[i]
		if !got.read || got.found != found || !bytes.Equal(got.value, want) {
			t.Errorf("entry %d (%s/%s): %+v, want found %v %x", i, e.Limiter, e.Key, got, found, want)
		}
	}
	if _, err := m.ApplyPrefetched(b, now, pf); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[[2]string]int64{{"fw", "z"}: 1, {"fw", "d"}: 6, {"sfw", "a"}: 8, {"fw", "b"}: 3} {
		ks, err := m.KeyState(key[0], key[1], now)
		if err != nil || ks.Count != want {
			t.Errorf("%s/%s: %+v %v, want count %d", key[0], key[1], ks, err, want)
		}
	}
}

// countingStore records the keys read one by one (Get).
type countingStore struct {
	sortedStore
	gets []string
}

func (s *countingStore) Get(key []byte) ([]byte, bool, error) {
	s.gets = append(s.gets, string(key))
	return s.sortedStore.Get(key)
}

// Prefetch reads the records of a batch's asks' and signals' cold keys
// with its entries' (one GetSorted), and the merge uses them: no key is
// read again one by one. Before, a batch of 8,192 signals for keys not
// cached was read key by key by the committer, holding every other sync
// behind it (seconds under a flood).
func TestPrefetchAsksAndSignals(t *testing.T) {
	cfg := testConfig()
	cfg.Limiters = append(cfg.Limiters, wire.LimiterConfig{Name: "llm", Algorithm: wire.FixedWindow, Limit: 10, Period: sec,
		Upstream: &wire.UpstreamConfig{}})
	store := &countingStore{sortedStore: sortedStore{memStore: newMemStore(), t: t}}
	m, err := NewMerger(cfg, store, MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.EnablePrefetch()
	now := 1000 * sec
	b1 := batch("a", 1, now, wire.Delta{Limiter: "fw", Key: "e", Window: 1000, Delta: 1},
		wire.Delta{Limiter: "sfw", Key: "a1", Window: 1000, Delta: 3}, wire.Delta{Limiter: "sfw", Key: "a2", Window: 1000, Delta: 4})
	b1.Signals = []wire.Signal{{Limiter: "llm", Key: "s1", Limit: 5}, {Limiter: "llm", Key: "s2", Pause: sec}}
	if _, err := m.Apply(b1, now); err != nil {
		t.Fatal(err)
	}
	if err := m.Commit(now); err != nil {
		t.Fatal(err)
	}
	m.dropCache() // every key cold again
	b := batch("a", 2, now, wire.Delta{Limiter: "fw", Key: "e", Window: 1000, Delta: 1})
	b.Asks = []wire.Ask{{Limiter: "sfw", Key: "a1", Window: 1000, Cost: 5}, {Limiter: "sfw", Key: "a2", Window: 1000, Cost: 6},
		{Limiter: "fw", Key: "not-asked", Window: 1000, Cost: 1}} // approximate: takes no ask, read for nothing
	b.Signals = []wire.Signal{{Limiter: "llm", Key: "s1", Limit: 5}, {Limiter: "llm", Key: "s2", Failures: 1}}
	store.calls = 0
	pf := m.Prefetch(b)
	if pf == nil || store.calls != 1 {
		t.Fatalf("prefetch: %+v, %d GetSorted calls", pf, store.calls)
	}
	store.gets = nil // GetSorted reads through Get
	if _, err := m.ApplyPrefetched(b, now, pf); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][2]string{{"fw", "e"}, {"sfw", "a1"}, {"sfw", "a2"}, {"llm", "s1"}, {"llm", "s2"}} {
		if slices.Contains(store.gets, keyStorageKey(k[0], k[1])) {
			t.Errorf("the merge read %s/%s one by one after the prefetch", k[0], k[1])
		}
	}
	for _, k := range [][2]string{{"sfw", "a1"}, {"sfw", "a2"}, {"llm", "s1"}} {
		if ks, err := m.KeyState(k[0], k[1], now); err != nil || ks.Count == 0 && k[0] == "sfw" {
			t.Errorf("%s/%s after the prefetched apply: %+v %v", k[0], k[1], ks, err)
		}
	}
}
