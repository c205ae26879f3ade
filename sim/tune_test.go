package sim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tuner bounds the wait and the utilisation as well as the overrun:
// strict never overruns, so only those bounds can refuse an interval.
// Judged from each seed's results, every interval meets exactly when all
// three bounds hold on every seed, the pick is the largest such, and on
// this scenario, with a wait bound of 1 ms (strict makes a sparse isolate
// wait a round trip for its lease), no interval is recommended, where an
// overrun-only tuner picked the largest.
func TestTuneBoundsWait(t *testing.T) {
	sc, err := Builtin("default")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = Duration(5 * time.Second)
	o := TuneOptions{Strategy: Strict, Target: 1, Min: 10 * time.Millisecond, Max: time.Second, Points: 4,
		Seeds: []uint64{1, 2}, MaxWait: time.Millisecond}
	tu, err := testSim(t).Tune(context.Background(), sc, o)
	if err != nil {
		t.Fatal(err)
	}
	rtt := Duration(time.Millisecond)
	if tu.MaxWait != rtt || tu.MinUtil != DefaultMinUtil {
		t.Fatalf("bounds wait %v, util %g; want the 1ms asked for and %g", time.Duration(tu.MaxWait), tu.MinUtil, DefaultMinUtil)
	}
	largest := Duration(0)
	waitMissed := 0
	for _, p := range tu.Curve {
		meets := true
		for _, r := range p.Results {
			if r.WorstOverrunPct > 1 || !withinWait(r.WaitP99, rtt) || r.Utilisation < DefaultMinUtil {
				meets = false
			}
			if r.WorstOverrunPct <= 1 && !withinWait(r.WaitP99, rtt) {
				waitMissed++
			}
		}
		if p.Meets != meets || p.Meets != (len(p.Misses) == 0) {
			t.Errorf("interval %v: meets %v (misses %v), want %v", time.Duration(p.Interval), p.Meets, p.Misses, meets)
		}
		if p.Meets {
			largest = p.Interval
		}
	}
	if tu.Found != (largest > 0) || tu.Interval != largest {
		t.Errorf("picked %v (found %v), want %v", time.Duration(tu.Interval), tu.Found, time.Duration(largest))
	}
	if waitMissed == 0 || tu.Found {
		t.Errorf("no interval met the overrun and missed the wait (%d), or one was picked (%v): the test no longer tells",
			waitMissed, tu.Found)
	}
	// Without the wait bound, the utilisation bound decides: set just
	// above what the largest interval reached, it refuses that interval.
	o.MaxWait, o.MinUtil = -1, -1
	free, err := testSim(t).Tune(context.Background(), sc, o)
	if err != nil {
		t.Fatal(err)
	}
	last := free.Curve[len(free.Curve)-1]
	if !free.Found || free.Interval != last.Interval {
		t.Fatalf("without wait and util bounds strict picked %v (found %v), want the largest, %v", time.Duration(free.Interval),
			free.Found, time.Duration(last.Interval))
	}
	o.MinUtil = last.Utilisation + 0.01
	tight, err := testSim(t).Tune(context.Background(), sc, o)
	if err != nil {
		t.Fatal(err)
	}
	if p := tight.Curve[len(tight.Curve)-1]; p.Meets || !slices.Equal(p.Misses, []string{"util"}) || tight.Interval == last.Interval {
		t.Errorf("min util %.2f%%: the last interval (util %.2f%%) meets %v, misses %v; picked %v", o.MinUtil, p.Utilisation,
			p.Meets, p.Misses, time.Duration(tight.Interval))
	}
}

// Without a strategy the tuner takes the scenario's only one, and refuses
// to guess among several.
func TestTuneNamesItsStrategy(t *testing.T) {
	sc := small(t, 2, 10, 20, "constant", time.Second)
	sc.Strategies = []string{Approximate, Auto}
	_, err := testSim(t).Tune(context.Background(), sc, TuneOptions{Target: 1, Points: 1, Seeds: []uint64{1}})
	if err == nil || !strings.Contains(err.Error(), "approximate, auto") {
		t.Fatalf("two strategies, none named: %v, want an error naming both", err)
	}
	sc.Strategies = []string{Auto}
	tu, err := testSim(t).Tune(context.Background(), sc, TuneOptions{Target: 1, Points: 1, Seeds: []uint64{1},
		Max: 100 * time.Millisecond})
	if err != nil || tu.Strategy != Auto {
		t.Fatalf("tuned %q (%v), want auto", tu.Strategy, err)
	}
}
