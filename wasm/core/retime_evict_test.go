//go:build !wasip1

package core_test

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A key evicted after the cut whose refused batch carried both
// admitted units and final denials. Recall re-inserts it (flightEntry) once
// per item, and the denial item's cost must not be added to the key's
// local counters (lCur) as if admitted: a first version did, and those
// units stayed in lCur (never sent, never acknowledged), so the key denied
// units its limit still had.
func TestRecallKeepsDenialsOfAnEvictedKeyApart(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso", MaxKeys: 4, Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 10, Period: 10 * sec},
		{Name: "b", Algorithm: wire.FixedWindow, Limit: 1, Period: 10 * sec}}}
	m, c := retimeIsolate(t, cfg)
	t0 := 100_000*sec + 3*sec
	const ahead = 3 * sec // past the 2 s skew, within the window
	var r core.Result
	both := []core.Check{{Limiter: 0, Key: []byte("k"), Cost: 1}, {Limiter: 1, Key: []byte("k"), Cost: 1}}
	for i := int64(0); i < 4; i++ { // 1 admitted, 3 denied by b (final denials on a/k and b/k)
		if err := c.DecideMulti(both, t0+ahead+i, &r); err != nil {
			t.Fatal(err)
		}
		if r.Allowed != (i == 0) {
			t.Fatalf("decision %d: %+v", i, r)
		}
	}
	if err := c.Decide(0, []byte("k"), 1, t0+ahead+10, &r); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	// a/k: 2 admitted, 3 denied.
	cutRefused(t, m, c, t0+ahead+1e6, t0)
	flood(t, c, 12, 1, t0+ahead+2e6) // a flood evicts both keys
	now := t0 + 10e6
	b2 := recallAt(t, c, -ahead, now)
	rp, err := m.Apply(b2, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SyncIn(rp.AppendMsg(nil), now+1e6); err != nil {
		t.Fatal(err)
	}
	if u := c.Stats().UnsyncedCost; u != 0 {
		t.Errorf("after the batch cut again was acknowledged, %d units are unsynced, want 0", u)
	}
	more := 0
	for i := int64(0); i < 10; i++ {
		if err := c.Decide(0, []byte("k"), 1, now+2e6+i, &r); err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			more++
		}
	}
	if more != 8 {
		t.Errorf("a/k admitted %d more after 2 of 10, want 8", more)
	}
}

// A key of the refused batch evicted after the cut and used
// again before the refusal (so present, with another generation) when the
// refusal's reading steps the clock back across windows: rewindow moves
// every item's window (lwin), its entry's generation current or not, so the
// batch cut again carries the 3 units with the one admitted after the
// eviction (a first version moved only items of current entries and
// dropped the 3).
func TestRecallKeepsUnitsOfAKeyUsedAgainAfterEviction(t *testing.T) {
	cfg := retimeCfg()
	cfg.MaxKeys = 4
	m, c := retimeIsolate(t, cfg)
	t0 := 100_000*sec + 3*sec
	const ahead = 30 * sec
	var r core.Result
	if err := c.Decide(0, []byte("k"), 3, t0+ahead, &r); err != nil || !r.Allowed { // once: no CLOCK bit
		t.Fatal(r, err)
	}
	cutRefused(t, m, c, t0+ahead+1e6, t0)
	flood(t, c, 6, 1, t0+ahead+2e6)
	if err := c.Decide(0, []byte("k"), 1, t0+ahead+3e6, &r); err != nil || !r.Allowed { // k again, a new entry
		t.Fatal(r, err)
	}
	now := t0 + 10e6
	b2 := recallAt(t, c, -ahead, now)
	sum := int64(0)
	for _, e := range b2.Entries {
		if e.Limiter == "a" && e.Key == "k" {
			sum += e.Delta
		}
	}
	if sum != 4 {
		t.Errorf("the batch cut again carries %d of k's 4 units (3 refused, 1 since): %+v", sum, b2.Entries)
	}
}

// A refused batch whose keys a flood evicted before the recall, three of
// them with final denials only: Recall inserts each again, and each insert
// evicts an entry of the full table. A key put back with denials only has
// nothing unsynced, the victim a full table prefers: a first version
// evicted each with the next key it put back (the entries of the batch are
// now pinned while Recall runs), and reported the last one's denials in
// the window the step had left, which the coordinator refused again (a
// step now moves the denials' windows too).
func TestRecallKeepsEveryDenialItInsertsAgain(t *testing.T) {
	cfg := retimeCfg()
	cfg.MaxKeys = 4
	m, c := retimeIsolate(t, cfg)
	t0 := 100_000*sec + 3*sec
	const ahead = 30 * sec
	var r core.Result
	if err := c.Decide(0, []byte("u"), 1, t0+ahead, &r); err != nil || !r.Allowed { // denials ride along with a unit
		t.Fatal(r, err)
	}
	for k := byte(0); k < 3; k++ {
		if err := c.Decide(0, []byte{'d', '0' + k}, 6, t0+ahead+int64(k), &r); err != nil || r.Allowed || r.SyncRetry {
			t.Fatal(r, err)
		}
	}
	cutRefused(t, m, c, t0+ahead+1e6, t0)
	flood(t, c, 8, 2, t0+ahead+2e6)
	now := t0 + 10e6
	b2 := recallAt(t, c, -ahead, now)
	got := map[string]int64{}
	for _, d := range b2.Denials {
		got[d.Key] += d.Cost
	}
	for k := byte(0); k < 3; k++ {
		if key := string([]byte{'d', '0' + k}); got[key] != 6 {
			t.Errorf("the batch cut again reports %d of %s's denied 6 (all: %v)", got[key], key, got)
		}
	}
	if _, err := m.Apply(b2, now); err != nil {
		t.Fatalf("the batch cut again: %v", err)
	}
}

// A step forward while a batch is in flight, and the batch's key evicted
// by a flood before the reply: the cost the step moved is reported again
// in the coordinator's current window all the same (the key inserted
// again from the batch's copy of it). A first version skipped an evicted
// key's items at the reply: the coordinator had the units only in the
// window gone.
func TestStepWithBatchInFlightReportsAnEvictedKeyAgain(t *testing.T) {
	cfg := retimeCfg()
	cfg.MaxKeys = 4
	m, c := retimeIsolate(t, cfg)
	t0 := 100_000*sec + 10*sec + 1*sec // the coordinator 1 s into a window
	const behind = 1500e6
	var r core.Result
	for i := int64(0); i < 3; i++ {
		if err := c.Decide(0, []byte("k"), 1, t0-behind+i, &r); err != nil || !r.Allowed {
			t.Fatal(r, err)
		}
	}
	b := decodeBatch(t, out(t)(c.SyncOut(t0-behind+1e6, nil)))
	flood(t, c, 8, 2, t0-behind+2e6)
	c.ClockOffset(behind)
	rp, err := m.Apply(b, t0+3e6)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+4e6); err != nil {
		t.Fatal(err)
	}
	cur := t0 / (10 * sec)
	got := int64(0)
	for _, e := range decodeBatch(t, out(t)(c.SyncOut(t0+5e6, nil))).Entries {
		if e.Key == "k" && e.Window == cur {
			got += e.Delta
		}
	}
	if got != 3 {
		t.Errorf("the next batch reports %d of k's 3 units in window %d, want 3", got, cur)
	}
}
