package history_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/edgelimit/edgelimit/coordinator/history"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

const (
	minute = int64(time.Minute)
	hour   = int64(time.Hour)
	day    = 24 * hour
)

// t0 is a whole day, so minute and hour buckets start with it.
const t0 = 20000 * day

func testConfig() wire.Config {
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "inbox", Algorithm: wire.FixedWindow, Limit: 200, Period: day},
	}}
}

// openMem opens Pebble in memory (the restart tests of the coordinator
// use the disk).
func openMem(t testing.TB) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open(vfs.NewMem(), "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// apply feeds r one batch at now: key admitted adm of dem asked, its view
// count cnt.
func apply(r *history.Recorder, now int64, key string, adm, dem, cnt int64) {
	r.Applied(&wire.Batch{Entries: []wire.Delta{{Limiter: "inbox", Key: key, Window: now / day, Delta: adm, Demand: dem}}},
		&wire.Reply{Entries: []wire.View{{Limiter: "inbox", Key: key, Window: now / day, Count: cnt}}}, now)
}

// countRecords returns the stored history records of res.
func countRecords(t *testing.T, s *pebblestore.Store, res history.Resolution) int {
	t.Helper()
	n := 0
	if err := s.Scan([]byte{'H', byte(res)}, nil, func(k, v []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestHistoryDownsampledAndBounded feeds a recorder over Pebble one
// batch a minute for 26 hours, then one an hour for 31 days more: the
// minute buckets hold each minute, the hour bucket the sum of its minutes;
// minute buckets past 24 h and hour buckets past 30 days are deleted, so
// the records stay bounded whatever the run's length.
func TestHistoryDownsampledAndBounded(t *testing.T) {
	s := openMem(t)
	defer s.Close()
	r := history.NewRecorder(testConfig(), s, 0)
	now := int64(t0)
	for i := range 26 * 60 {
		now = t0 + int64(i)*minute + 30*int64(time.Second)
		apply(r, now, "a", 1, 1+int64(i%3), int64(i))
		r.Tick(now)
		if err := r.Flush(now); err != nil {
			t.Fatal(err)
		}
	}
	tot := history.Series{Limiter: "inbox", Total: true}
	last := history.Minute.Bucket(now)
	// The last minute is not written yet: Read adds it from memory.
	ms, err := r.Read(history.Minute, tot, last-history.MinuteBuckets+1, last+1)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range ms {
		j := int64(26*60-history.MinuteBuckets) + int64(i) // the feed's index of this minute
		if c.Admitted != 1 || c.Denied != j%3 {
			t.Fatalf("minute %d: %+v, want admitted 1, denied %d", i, c, j%3)
		}
	}
	// Hour 1 (minutes 60..119) sums its 60 minutes: 60 admitted, denied 0+1+2 repeated.
	hs, err := r.Read(history.Hour, tot, t0/hour, t0/hour+26)
	if err != nil {
		t.Fatal(err)
	}
	if hs[1].Admitted != 60 || hs[1].Denied != 60 {
		t.Fatalf("hour 1: %+v, want 60 admitted, 60 denied", hs[1])
	}
	// Minutes older than 24 h are gone from the store.
	old, err := s.ReadHistory(history.Minute, tot, t0/minute, t0/minute+60)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range old {
		if !c.Zero() {
			t.Fatalf("minute %d of the first hour still stored after 26 h: %+v", i, c)
		}
	}
	// Two series (total, key a), trimmed once an hour: at most 2 * (24 h + 1 h) of minutes.
	if n := countRecords(t, s, history.Minute); n > 2*(history.MinuteBuckets+60) || n < 2*history.MinuteBuckets {
		t.Fatalf("%d minute records, want 24-25 h of two series (%d-%d)", n, 2*history.MinuteBuckets, 2*(history.MinuteBuckets+60))
	}
	for i := range 31 * 24 {
		now += hour
		apply(r, now, "a", 2, 2, int64(i))
		r.Tick(now)
		if err := r.Flush(now); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRecords(t, s, history.Hour); n > 2*(history.HourBuckets+1) {
		t.Fatalf("%d hour records after 32 days, want at most %d (two series, 30 days)", n, 2*history.HourBuckets)
	}
	if n := countRecords(t, s, history.Minute); n > 2*(history.MinuteBuckets+60) {
		t.Fatalf("%d minute records, want at most %d", n, 2*(history.MinuteBuckets+60))
	}
	if _, err := r.Read(history.Minute, tot, 0, history.MinuteBuckets+1); err == nil {
		t.Fatal("a read of more than 24 h of minutes was taken")
	}
}

// TestKeptKeysBounded: at most the bound of keys per limiter is kept; a new
// key takes the place of one only when that one has been idle for
// EvictIdle, so a flood of new keys does not push out keys in use; the
// limiter's total counts every key.
func TestKeptKeysBounded(t *testing.T) {
	s := openMem(t)
	defer s.Close()
	r := history.NewRecorder(testConfig(), s, 3)
	for i := range 3 {
		apply(r, t0, fmt.Sprint("k", i), 1, 1, 1)
	}
	for i := range 100 {
		apply(r, t0+minute, fmt.Sprint("flood", i), 1, 1, 1)
	}
	if ks, n := r.Search("inbox", "", 10); n != 3 || ks[0].Key != "k0" {
		t.Fatalf("kept %d keys (%v), want k0..k2", n, ks)
	}
	if st := r.Stats(); st.Untracked != 200 || st.Kept != 3 {
		t.Fatalf("stats %+v, want 200 untracked reports (100 keys, delta and view), 3 kept", st)
	}
	// k1 and k2 stay in use; k0 idles past EvictIdle: a new key replaces it.
	later := t0 + history.EvictIdle + 2*minute
	apply(r, later-minute, "k1", 1, 1, 2)
	apply(r, later-minute, "k2", 1, 1, 2)
	apply(r, later, "new", 1, 1, 1)
	if ks, n := r.Search("inbox", "", 10); n != 3 || ks[0].Key != "k1" || ks[2].Key != "new" {
		t.Fatalf("kept %v, want k1, k2, new", ks)
	}
	if err := r.Stop(later); err != nil {
		t.Fatal(err)
	}
	tot, err := r.Read(history.Hour, history.Series{Limiter: "inbox", Total: true}, t0/hour, t0/hour+1)
	if err != nil {
		t.Fatal(err)
	}
	if tot[0].Admitted != 103 {
		t.Fatalf("hour 0 total admitted %d, want 103 (every key, kept or not)", tot[0].Admitted)
	}
	// The stored kept keys follow: k0 deleted, new added.
	ks, err := s.LoadKept("inbox")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, k := range ks {
		names[k.Key] = true
	}
	if len(ks) != 3 || names["k0"] || !names["new"] {
		t.Fatalf("stored kept keys %v, want k1, k2, new", ks)
	}
}

// TestPausedCountsApart: the denied cost of a key the reply says is paused
// (or has an open circuit) counts as paused, not denied.
func TestPausedCountsApart(t *testing.T) {
	s := openMem(t)
	defer s.Close()
	r := history.NewRecorder(testConfig(), s, 0)
	r.Applied(&wire.Batch{Entries: []wire.Delta{{Limiter: "inbox", Key: "p", Delta: 1, Demand: 5},
		{Limiter: "inbox", Key: "c", Delta: 0, Demand: 2}, {Limiter: "inbox", Key: "d", Delta: 1, Demand: 4}}},
		&wire.Reply{Upstream: []wire.UpView{{Limiter: "inbox", Key: "p", Pause: int64(time.Second)},
			{Limiter: "inbox", Key: "c", Circuit: wire.CircuitOpen, Open: int64(time.Second)}}}, t0)
	want := map[string]history.Counts{"p": {Admitted: 1, Paused: 4}, "c": {Paused: 2}, "d": {Admitted: 1, Denied: 3}}
	for k, w := range want {
		got, err := r.Read(history.Minute, history.Series{Limiter: "inbox", Key: k}, t0/minute, t0/minute+1)
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != w {
			t.Errorf("key %s: %+v, want %+v", k, got[0], w)
		}
	}
}

// BenchmarkRecorderApplied is what the history adds to a merge: one batch
// of 1000 entries and their views per op, at the default bound of 1000
// kept keys: "kept" cycles over 1000 keys (all kept), "flood" over
// 100,000 (the bound reached: most are not kept).
func BenchmarkRecorderApplied(b *testing.B) {
	for _, bc := range []struct {
		name    string
		batches int
	}{{"kept", 1}, {"flood", 100}} {
		b.Run(bc.name, func(b *testing.B) {
			s := openMem(b)
			defer s.Close()
			r := history.NewRecorder(testConfig(), s, 0)
			bts, rps := make([]*wire.Batch, bc.batches), make([]*wire.Reply, bc.batches)
			for n := range bc.batches {
				bts[n], rps[n] = &wire.Batch{Entries: make([]wire.Delta, 1000)}, &wire.Reply{Entries: make([]wire.View, 1000)}
				for i := range 1000 {
					k := fmt.Sprint("k", n*1000+i)
					bts[n].Entries[i] = wire.Delta{Limiter: "inbox", Key: k, Window: t0 / day, Delta: 1, Demand: 2}
					rps[n].Entries[i] = wire.View{Limiter: "inbox", Key: k, Window: t0 / day, Count: int64(i)}
				}
			}
			n := 0
			for b.Loop() {
				r.Applied(bts[n%bc.batches], rps[n%bc.batches], t0)
				n++
			}
		})
	}
}

// BenchmarkRecorderFlushDisk is the write of one minute at the bound:
// 1000 kept keys and the limiter's total, each added to its minute and
// hour bucket (read, add, write), and the 1000 keys' views, in synced
// batches on Pebble on disk. One op is one minute's write.
func BenchmarkRecorderFlushDisk(b *testing.B) {
	s, err := pebblestore.Open(vfs.Default, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := history.NewRecorder(testConfig(), s, 0)
	bt, rp := &wire.Batch{Entries: make([]wire.Delta, 1000)}, &wire.Reply{Entries: make([]wire.View, 1000)}
	for i := range 1000 {
		k := fmt.Sprint("k", i)
		bt.Entries[i] = wire.Delta{Limiter: "inbox", Key: k, Delta: 1, Demand: 2}
		rp.Entries[i] = wire.View{Limiter: "inbox", Key: k, Count: int64(i)}
	}
	now := int64(t0)
	for b.Loop() {
		b.StopTimer()
		r.Applied(bt, rp, now)
		now += minute
		r.Tick(now)
		b.StartTimer()
		if err := r.Flush(now); err != nil {
			b.Fatal(err)
		}
	}
}

// refusing is a Pebble store whose history writes fail while down is set.
type refusing struct {
	*pebblestore.Store
	down bool
}

func (s *refusing) AddHistory(id string, pts []history.Point) error {
	if s.down {
		return fmt.Errorf("disk full")
	}
	return s.Store.AddHistory(id, pts)
}

// TestPendingWhileStoreRefuses: minutes the store refuses wait in memory
// (Read still shows them) and are written when it takes writes again;
// past MaxPending series-minutes the oldest are dropped and counted.
func TestPendingWhileStoreRefuses(t *testing.T) {
	s := &refusing{Store: openMem(t), down: true}
	defer s.Close()
	r := history.NewRecorder(testConfig(), s, 0)
	now := int64(t0)
	for range 3 {
		apply(r, now, "a", 1, 1, 1)
		now += minute
		r.Tick(now)
		if err := r.Flush(now); err == nil {
			t.Fatal("a refused write reported no error")
		}
	}
	tot := history.Series{Limiter: "inbox", Total: true}
	if st := r.Stats(); st.Pending != 3 || st.WriteErrors != 3 || st.LastError == "" {
		t.Fatalf("stats %+v, want 3 minutes pending, 3 errors", st)
	}
	if got, _ := r.Read(history.Hour, tot, t0/hour, t0/hour+1); got[0].Admitted != 3 {
		t.Fatalf("pending minutes not read: %+v", got)
	}
	s.down = false
	if err := r.Flush(now); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ReadHistory(history.Hour, tot, t0/hour, t0/hour+1); got[0].Admitted != 3 || r.Stats().Pending != 0 {
		t.Fatalf("after the store came back: stored %+v, pending %d", got, r.Stats().Pending)
	}
	// A flood of distinct keys while the store refuses: bounded.
	s.down = true
	r = history.NewRecorder(testConfig(), s, 0)
	for m := range 300 {
		bt, rp := &wire.Batch{}, &wire.Reply{}
		for i := range 1000 {
			k := fmt.Sprint("k", i)
			bt.Entries = append(bt.Entries, wire.Delta{Limiter: "inbox", Key: k, Delta: 1, Demand: 1})
			rp.Entries = append(rp.Entries, wire.View{Limiter: "inbox", Key: k, Count: int64(m)})
		}
		r.Applied(bt, rp, now)
		now += minute
		r.Tick(now)
	}
	if st := r.Stats(); st.Dropped == 0 || st.Pending*1002 > history.MaxPending+1002 {
		t.Fatalf("after 300 refused minutes of 1001 series: %+v, want the oldest dropped within MaxPending", st)
	}
}

// TestKilledLosesAtMostAPart: the counts of the current minute are written
// in parts every 10 s (Tick), which the store adds up, so a coordinator
// killed without Stop loses at most the part since; before, the whole
// minute (a probe lost 102,460 acknowledged units of history in one kill).
func TestKilledLosesAtMostAPart(t *testing.T) {
	s := openMem(t)
	defer s.Close()
	r := history.NewRecorder(testConfig(), s, 0)
	sec := int64(time.Second)
	for _, at := range []struct{ t, adm int64 }{{1, 5}, {5, 7}, {12, 3}, {25, 4}} {
		now := t0 + at.t*sec
		apply(r, now, "a", at.adm, at.adm, at.adm)
		r.Tick(now)
		if err := r.Flush(now); err != nil {
			t.Fatal(err)
		}
	}
	// Killed here, 25 s into the minute: the store has every part sealed.
	tot := history.Series{Limiter: "inbox", Total: true}
	m := history.Minute.Bucket(t0)
	got, err := s.ReadHistory(history.Minute, tot, m, m+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Admitted != 19 {
		t.Errorf("stored after 25 s of a minute: %+v, want the 19 admitted (parts sealed at 1, 12 and 25 s)", got)
	}
	// Read (stored plus unwritten) counts each unit once.
	all, err := r.Read(history.Minute, tot, m, m+1)
	if err != nil || all[0].Admitted != 19 {
		t.Errorf("read: %+v %v, want 19", all, err)
	}
}
