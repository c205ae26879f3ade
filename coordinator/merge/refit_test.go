package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// onStore returns a test coordinator over store s with the limiters lims.
func onStore(t *testing.T, s *memStore, at int64, lims ...wire.LimiterConfig) (*testCoordinator, *fakeClock) {
	t.Helper()
	return newTestCoordinator(t, at, func(o *testOptions) {
		o.Store, o.Config = s, wire.Config{Version: wire.Version, Limiters: lims}
	})
}

// A limiter's period raised across a restart: its keys' records, whose
// window indexes were of the old period (a minute's index read as an
// hour's, about 3,400 years ahead), start again in the new period, and
// the next deltas are counted. Before, every delta was dropped as stale
// (11,100 acknowledged, 0 counted) and the key's edges admitted all.
func TestPeriodRaisedRefits(t *testing.T) {
	const minute, hour = 60 * sec, 3600 * sec
	s := newMemStore()
	for _, mode := range []string{wire.Approximate, wire.Strict} {
		lim := wire.LimiterConfig{Name: "p" + mode, Algorithm: wire.FixedWindow, Limit: 20, Period: minute, Mode: mode}
		c, _ := onStore(t, s, t0, lim)
		mustSync(t, c, batch("a-"+mode, 1, t0, wire.Delta{Limiter: lim.Name, Key: "u1", Window: t0 / minute, Delta: 10, Demand: 10}))
		lim.Period = hour
		c2, _ := onStore(t, s, t0+sec, lim)
		mustSync(t, c2, batch("b-"+mode, 1, t0+sec, wire.Delta{Limiter: lim.Name, Key: "u1", Window: (t0 + sec) / hour, Delta: 5, Demand: 5}))
		ks := getKey(t, c2, lim.Name, "u1")
		if st := c2.m.Stats(); ks.Window != (t0+sec)/hour || ks.Count != 5 || st.DeltasStale != 0 || st.RecordsRefit != 1 {
			t.Errorf("%s, 1 m raised to 1 h: window %d, count %d, %d stale, %d refit; want %d, 5, 0, 1",
				mode, ks.Window, ks.Count, st.DeltasStale, st.RecordsRefit, (t0+sec)/hour)
		}
	}
}

// A bucket's period shortened across a restart: its TAT, a refill of the
// old period ahead, is brought back within the new bucket's reach. Before,
// an exhausted key of 10/1 h made 10/1 s denied for the hour.
func TestBucketPeriodShortenedRefits(t *testing.T) {
	s := newMemStore()
	lim := wire.LimiterConfig{Name: "g", Algorithm: wire.GCRA, Limit: 10, Period: 3600 * sec, Mode: wire.Strict}
	c, _ := onStore(t, s, t0, lim)
	mustSync(t, c, batch("a", 1, t0, wire.Delta{Limiter: "g", Key: "k", Delta: 10, Demand: 10}))
	if ks := getKey(t, c, "g", "k"); ks.TAT < t0+3000*sec {
		t.Fatalf("10 of 10/h: TAT %d s ahead, want about an hour", (ks.TAT-t0)/sec)
	}
	lim.Period = sec
	c2, _ := onStore(t, s, t0+sec, lim)
	if ks := getKey(t, c2, "g", "k"); ks.TAT > t0+sec+sec {
		t.Errorf("10/1 s after 10/1 h: TAT %d s ahead, want within its burst's refill (1 s)", (ks.TAT-t0-sec)/sec)
	}
}

// A key record that does not decode starts again, counted, and the batch
// that names it is applied, its other keys too; before, every batch that
// named the key failed (500) and the key could not even be reset.
func TestCorruptRecordStartsAgain(t *testing.T) {
	s := newMemStore()
	lim := wire.LimiterConfig{Name: "fw", Algorithm: wire.FixedWindow, Limit: 100, Period: sec}
	if err := s.Commit([]Op{{Key: appendKeyStorageKey(nil, "fw", "bad"), Value: []byte("\xffgarbage")}}); err != nil {
		t.Fatal(err)
	}
	c, _ := onStore(t, s, t0, lim)
	mustSync(t, c, batch("a", 1, t0, wire.Delta{Limiter: "fw", Key: "bad", Window: t0 / sec, Delta: 2, Demand: 2},
		wire.Delta{Limiter: "fw", Key: "good", Window: t0 / sec, Delta: 3, Demand: 3}))
	if bad, good := getKey(t, c, "fw", "bad"), getKey(t, c, "fw", "good"); bad.Count != 2 || good.Count != 3 || c.m.Stats().CorruptRecords != 1 {
		t.Errorf("a batch naming a corrupt record: counts %d and %d, %d corrupt; want 2, 3 and 1", bad.Count, good.Count, c.m.Stats().CorruptRecords)
	}
	if v, ok, _ := s.Get(appendKeyStorageKey(nil, "fw", "bad")); !ok || string(v) == "\xffgarbage" {
		t.Error("the corrupt record was not written again")
	}
}

// GC keeps the records of a limiter no longer configured for OrphanGrace
// (a limiter removed by mistake and restored keeps its counts; deleted 2 s
// after a start without it before), then deletes them.
func TestOrphanRecordsKeptForGrace(t *testing.T) {
	s := newMemStore()
	fw := wire.LimiterConfig{Name: "fw", Algorithm: wire.FixedWindow, Limit: 100, Period: 3600 * sec}
	gone := wire.LimiterConfig{Name: "gone", Algorithm: wire.FixedWindow, Limit: 10, Period: 3600 * sec, Mode: wire.Strict}
	c, _ := onStore(t, s, t0, fw, gone)
	mustSync(t, c, batch("a", 1, t0, wire.Delta{Limiter: "gone", Key: "k", Window: t0 / (3600 * sec), Delta: 10, Demand: 10}))
	c2, _ := onStore(t, s, t0+sec, fw)
	key := appendKeyStorageKey(nil, "gone", "k")
	for _, at := range []int64{t0 + sec, t0 + 10*sec, t0 + 23*3600*sec} {
		if _, err := c2.m.GC(at, 1000); err != nil {
			t.Fatal(err)
		}
		if err := c2.m.Commit(at); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.Get(key); !ok {
			t.Fatalf("the removed limiter's record deleted %d s after the start without it, want kept for a day", (at-t0-sec)/sec)
		}
	}
	c3, _ := onStore(t, s, t0+20*sec, fw, gone)
	if ks := getKey(t, c3, "gone", "k"); ks.Count != 10 {
		t.Errorf("restored: count %d, want the 10 counted before", ks.Count)
	}
	at := t0 + 25*3600*sec
	for range 2 { // (a pass may end at the scan's end; the next starts again)
		if _, err := c2.m.GC(at, 1000); err != nil {
			t.Fatal(err)
		}
		if err := c2.m.Commit(at); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := s.Get(key); ok {
		t.Error("the removed limiter's record kept past the grace")
	}
}
