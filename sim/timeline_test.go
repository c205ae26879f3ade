package sim

import (
	"context"
	"testing"
	"time"
)

// TestTimelineRecordsEveryWindow: with SweepOptions.Timeline, each result
// holds its key's admitted and offered cost per window, summing to the
// run's totals (one key), one entry per window of the run; local-only at
// three times the limit admits 4 x limit in every window; without the
// option nothing is recorded.
func TestTimelineRecordsEveryWindow(t *testing.T) {
	const isolates, limit, secs = 4, 10, 6
	sc := small(t, isolates, limit, isolates*limit*3, "constant", secs*time.Second)
	rs, err := testSim(t).Sweep(context.Background(), sc, SweepOptions{Strategies: []string{LocalOnly, Strict},
		Intervals: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}, Seed: 1, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("%d results, want 4", len(rs))
	}
	for _, r := range rs {
		tl := r.Timeline
		if tl == nil {
			t.Fatalf("%s at %v: no timeline", r.Strategy, r.Sync)
		}
		if tl.Key != keyName(sc.Traffic[0].Keys.Prefix, 0) || tl.Limiter != "api" || tl.Limit != limit || time.Duration(tl.Period) != time.Second || tl.Truncated {
			t.Fatalf("%s: timeline %+v", r.Strategy, tl)
		}
		if len(tl.Admitted) != secs || len(tl.Offered) != secs || tl.First != 0 {
			t.Fatalf("%s: %d windows from %d, want %d from 0", r.Strategy, len(tl.Admitted), tl.First, secs)
		}
		var adm, off int64
		for i := range tl.Admitted {
			adm, off = adm+tl.Admitted[i], off+tl.Offered[i]
			if r.Strategy == LocalOnly && tl.Admitted[i] != isolates*limit {
				t.Errorf("local-only window %d admitted %d, want %d", i, tl.Admitted[i], isolates*limit)
			}
			if r.Strategy == Strict && tl.Admitted[i] > limit {
				t.Errorf("strict window %d admitted %d over the limit %d", i, tl.Admitted[i], limit)
			}
		}
		if adm != r.Admitted || off != r.Offered {
			t.Errorf("%s: timeline sums admitted %d offered %d, result %d %d", r.Strategy, adm, off, r.Admitted, r.Offered)
		}
	}
	r, err := testSim(t).Run(context.Background(), sc, LocalOnly, time.Second, 1, nil)
	if err != nil || r.Timeline != nil {
		t.Fatalf("Run recorded a timeline: %v %+v", err, r.Timeline)
	}
}

// TestTimelineBounded: a run with more windows than MaxTimelineWindows
// keeps the first ones and says so.
func TestTimelineBounded(t *testing.T) {
	sc := small(t, 1, 1, 1500, "constant", 3*time.Second)
	sc.Config.Limiters[0].Period = "1ms"
	if err := sc.Prepare(); err != nil {
		t.Fatal(err)
	}
	rs, err := testSim(t).Sweep(context.Background(), sc, SweepOptions{Strategies: []string{LocalOnly},
		Intervals: []time.Duration{100 * time.Millisecond}, Seed: 1, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	tl := rs[0].Timeline
	if tl == nil || !tl.Truncated || len(tl.Admitted) != MaxTimelineWindows || len(tl.Offered) != MaxTimelineWindows {
		t.Fatalf("timeline of 3000 windows: %v", tl)
	}
	var adm int64
	for _, a := range tl.Admitted {
		adm += a
	}
	if adm == 0 || adm >= rs[0].Admitted {
		t.Fatalf("kept %d of %d admitted: want the first windows only", adm, rs[0].Admitted)
	}
}
