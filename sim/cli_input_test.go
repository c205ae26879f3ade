package sim

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Input that used to run for ever or mean nothing is refused with the
// reason: a JSONL line without a timestamp (read as 0, a 54-year run next
// to Unix times), a timestamp of 0 among Unix times, a JSONL cost of 0
// (1 before, where CSV refused it), a sync interval outside the module's
// 1ms-1h (1 ns ran for ever).
func TestTraceAndScenarioInputRefused(t *testing.T) {
	for _, c := range []struct {
		name, data string
		jsonl      bool
		want       string
	}{
		{"no t", `{"t": 1718000000, "limiter": "a", "key": "k"}` + "\n" + `{"limiter": "a", "key": "k"}`, true, "no timestamp"},
		{"0 among Unix times", "1718000000,,a,k\n0,,a,k\n1718000001,,a,k\n", false, "span"},
		{"jsonl cost 0", `{"t": 1, "limiter": "a", "key": "k", "cost": 0}`, true, "cost must be"},
	} {
		if _, err := ParseTrace([]byte(c.data), c.jsonl); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error about %q", c.name, err, c.want)
		}
	}
	sc, err := Builtin("default")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{time.Nanosecond, 2 * time.Hour} {
		sc.Sync = []Duration{Duration(d)}
		if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), "between 1ms and 1h") {
			t.Errorf("sync %v: %v; want refused", d, err)
		}
	}
}

// The tuner refuses what it cannot tune: a strategy that does not depend
// on the interval, intervals longer than the run (a 100h pick of a 10 s
// run before), traffic that sends nothing (every bound met: 2.5 s picked
// before).
func TestTuneRefusesWhatItCannotTune(t *testing.T) {
	sc, err := Builtin("default")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = Duration(2 * time.Second)
	s := testSim(t)
	for _, c := range []struct {
		name string
		o    TuneOptions
		want string
	}{
		{"central", TuneOptions{Strategy: Central, Target: 1, Seeds: []uint64{1}}, "does not depend"},
		{"longer than the run", TuneOptions{Strategy: Strict, Target: 1, Max: time.Hour, Seeds: []uint64{1}}, "no longer than the run"},
	} {
		if _, err := s.Tune(context.Background(), sc, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error about %q", c.name, err, c.want)
		}
	}
	quiet := *sc
	quiet.Traffic = append([]Traffic(nil), sc.Traffic...)
	for i := range quiet.Traffic {
		quiet.Traffic[i].Pattern = Pattern{Kind: "onoff", On: Duration(time.Nanosecond), Off: Duration(time.Hour), Factor: 1, Period: sc.Duration}
	}
	if err := quiet.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Tune(context.Background(), &quiet, TuneOptions{Strategy: Strict, Target: 1, Points: 2, Min: 10 * time.Millisecond,
		Max: 100 * time.Millisecond, Seeds: []uint64{1}})
	if err == nil || !strings.Contains(err.Error(), "no request") {
		t.Errorf("traffic that sends nothing: %v; want refused", err)
	}
}
