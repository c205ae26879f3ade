package coordinator

import (
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"
)

// The busiest-keys set matches a full sort of the counts when every key's
// count only grows (as counts do within a window), stays bounded, and a
// new window starts it afresh.
func TestTopKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	top := newTopKeys(10)
	counts := map[string]int64{}
	for i := 0; i < 20000; i++ {
		k := "k" + strconv.Itoa(int(rng.ExpFloat64()*30))
		counts[k] += 1 + int64(rng.IntN(3))
		top.observe(k, 7, counts[k])
		if len(top.heap) > 10 || len(top.index) != len(top.heap) {
			t.Fatalf("set of %d (index %d), want at most 10", len(top.heap), len(top.index))
		}
	}
	var all []topEntry
	for k, c := range counts {
		all = append(all, topEntry{k, c})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].count != all[j].count {
			return all[i].count > all[j].count
		}
		return all[i].key < all[j].key
	})
	got := top.list(5)
	for i := range got {
		if got[i] != all[i] {
			t.Fatalf("top 5 %v, want %v", got, all[:5])
		}
	}
	top.forget(got[0].key)
	if l := top.list(1); l[0] == got[0] {
		t.Fatal("a forgotten key is still listed")
	}
	top.observe("fresh", 8, 1)
	if l := top.list(10); len(l) != 1 || l[0].key != "fresh" {
		t.Fatalf("new window: %v", l)
	}
	top.observe("old", 7, 100) // a late delta of the old window does not rank
	if len(top.list(10)) != 1 {
		t.Fatal("an old window's key was ranked")
	}
}
