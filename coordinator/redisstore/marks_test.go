package redisstore

import (
	"context"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/merge"
)

// AdvanceMarks sets a mark (one call), renews one already at its seq (a
// duplicate's, Dup: only to be confirmed by WAIT), and, on a store that
// does not wait, sends no call at all for a duplicate's mark: an
// amendment (a duplicate of its applied batch) costs no round trip for it.
func TestAdvanceMarksDuplicateWithoutWait(t *testing.T) {
	_, s := startCluster(t, 3, 8)
	ctx := context.Background()
	m := merge.MarkSet{Isolate: "iso", Seq: 1, Value: []byte("v1"), TTL: 60e9}
	trips := func() int64 { return s.Stats().RoundTrips }
	before := trips()
	if err := s.AdvanceMarks(ctx, []merge.MarkSet{m}); err != nil {
		t.Fatal(err)
	}
	if d := trips() - before; d < 1 {
		t.Fatalf("a new mark: %d round trips, want at least 1", d)
	}
	m.Dup = true
	before = trips()
	if err := s.AdvanceMarks(ctx, []merge.MarkSet{m}); err != nil {
		t.Fatal(err)
	}
	if d := trips() - before; d != 0 {
		t.Errorf("a duplicate's mark without WAIT: %d round trips, want 0", d)
	}
	key := s.RedisKey([]byte(merge.HWMStorageKey("iso")))
	c, err := s.masterFor(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.HGet(ctx, key, "s").Result(); err != nil || v != "1" {
		t.Fatalf("mark seq %q (%v), want 1", v, err)
	}
}
