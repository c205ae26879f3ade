package core

import (
	"strconv"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestExpiredStateIsEvictedFirst fills the table with live keys (current
// window) placed first in the CLOCK order and expired keys (windows long
// over) after them; new keys must evict the expired ones, though the sweep
// reaches the live ones first.
func TestExpiredStateIsEvictedFirst(t *testing.T) {
	c, err := New(wire.Config{Version: wire.Version, MaxKeys: 40, Limiters: []wire.LimiterConfig{
		{Name: "w", Algorithm: wire.FixedWindow, Limit: 100, Period: 1e9}}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	decide := func(key string, cost, now int64) {
		t.Helper()
		if err := c.Decide(0, []byte(key), cost, now, &r); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		decide("live"+strconv.Itoa(i), 3, 10e9) // window 10, alive until 12 s
	}
	for i := 0; i < 20; i++ {
		decide("old"+strconv.Itoa(i), 3, 0) // window 0, expired from 2 s
	}
	for i := 0; i < 20; i++ {
		decide("new"+strconv.Itoa(i), 1, 10e9)
	}
	for i := 0; i < 20; i++ {
		decide("live"+strconv.Itoa(i), 0, 10e9) // peek
		if r.Remaining != 97 {
			t.Fatalf("live%d lost its count (remaining %d): a live key was evicted before an expired one", i, r.Remaining)
		}
	}
	if st := c.Stats(); st.Evictions != 20 || st.Keys != 40 {
		t.Fatalf("stats %+v: want 20 evictions, 40 keys", st)
	}
}
