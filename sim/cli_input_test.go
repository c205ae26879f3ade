package sim

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
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
		// (It said "give an isolate or a location, not both".)
		{"negative isolate", `{"t": 1, "isolate": -5, "limiter": "a", "key": "k"}`, true, "must be >= 0"},
		{"negative location -1", `{"t": 1, "location": -1, "limiter": "a", "key": "k"}`, true, "must be >= 0"},
	} {
		if _, err := ParseTrace([]byte(c.data), c.jsonl); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error about %q", c.name, err, c.want)
		}
	}
	sc, err := Builtin("default")
	if err != nil {
		t.Fatal(err)
	}
	simr, err := New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer simr.Close(context.Background())
	for _, d := range []time.Duration{time.Nanosecond, 2 * time.Hour} {
		sc.Sync = []Duration{Duration(d)}
		if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), "between 1ms and 1h") {
			t.Errorf("sync %v: %v; want refused", d, err)
		}
		// The corpus's and the tuner's path (Sweep) too: 1 ns ran for
		// ever with --corpus.
		sc.Sync = nil
		if _, err := simr.Sweep(context.Background(), sc, SweepOptions{Intervals: []time.Duration{d}}); err == nil || !strings.Contains(err.Error(), "between 1ms and 1h") {
			t.Errorf("Sweep at %v: %v; want refused", d, err)
		}
	}
	// A 0 written in the file is not taken for an absent field: "isolates":
	// 0 ran 64 isolates and "duration": "0s" a minute.
	const head = `{"config": {"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 5, "period": "1s"}]}, `
	for _, c := range []struct{ body, want string }{
		{`"isolates": 0}`, "isolates is 0"},
		{`"duration": "0s"}`, "duration is 0"},
		{`"locations": 0}`, "locations is 0"},
		{`"traffic": [{"limiter": "a", "rate": 5, "cost": 0}]}`, "traffic[0].cost is 0"},
		// Text after the object was ignored, and with it the zeros'
		// check (this ran 64 isolates).
		{`"isolates": 0} x`, "more than one JSON object"},
		{`"isolates": 4} {}`, "more than one JSON object"},
		// A lifetime of 1 ns replaced isolates for ever.
		{`"churn": {"lifetime": "1ns"}}`, "churn.lifetime must be 0"},
		// Partitions of isolates or locations the scenario does not have
		// cut nothing, and a negative spacing changed the results: all
		// accepted before.
		{`"isolates": 4, "network": {"partitions": [{"isolate": 999, "start": "0s", "duration": "1s"}]}}`, "isolate 999 is not one of"},
		{`"isolates": 4, "network": {"partitions": [{"isolate": -1, "start": "0s", "duration": "1s"}]}}`, "isolate -1 is not one of"},
		{`"locations": 4, "network": {"partitions": [{"location": 77, "start": "0s", "duration": "1s"}]}}`, "location 77 is not one of"},
		{`"early_spacing": "-1s"}`, "early_spacing must be >= 0"},
		// Bursts of 1 ns: 200 ms simulated took 14 s; 100,000 isolates
		// passed 6 GB in 24 s.
		{`"traffic": [{"limiter": "a", "rate": 5, "pattern": {"kind": "pareto", "on": "1ns", "off": "1ns", "shape": 1.5}}]}`, "traffic[0].pattern: on + off must be at least 1ms, got 2ns"},
		{`"isolates": 100000}`, "isolates must be between 1 and 20000"},
		// An empty list took the default list ("strategies": [] ran all
		// six), a list naming one twice ran it twice.
		{`"strategies": [ ]}`, "strategies is an empty list"},
		{`"sync": []}`, "sync is an empty list"},
		{`"traffic": []}`, "traffic is an empty list"},
		{`"strategies": ["auto", "strict", "auto"]}`, `strategy "auto" is listed twice`},
		{`"sync": ["100ms", "0.1s"]}`, "sync interval 100ms is listed twice"},
		// 10,000,000 keys took 5 GB before a run began.
		{`"traffic": [{"limiter": "a", "rate": 5, "keys": {"dist": "uniform", "count": 10000000}}]}`, "count must be between 1 and 1000000"},
		{`"traffic": [{"limiter": "a", "rate": 5, "keys": {"dist": "uniform", "count": 600000}},
		  {"limiter": "a", "rate": 5, "keys": {"dist": "uniform", "count": 600000, "prefix": "b"}}]}`, "names 1200000 keys in all"},
	} {
		if _, err := ParseScenario([]byte(head+c.body), ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error about %q", c.body, err, c.want)
		}
	}
	if sc, err := ParseScenario([]byte(head+`"duration": "1d", "isolates": 2}`), ""); err != nil || time.Duration(sc.Duration) != 24*time.Hour {
		t.Errorf(`"duration": "1d": %v; want a day`, err)
	}
}

// Traces as users export them: a UTF-8 byte order mark before the first
// line (a spreadsheet's CSV export) is skipped, where it made the first
// request a header, and a JSONL or counts trace CSV; trace_offset skips
// the start of a request trace too, and trace_scale, which cannot apply to
// one, is refused (both were ignored).
func TestTraceAsExported(t *testing.T) {
	const bom = "\xef\xbb\xbf"
	if tr, err := ParseTrace([]byte(bom+"0.5,,a,k\n1,,a,k\n"), false); err != nil || len(tr) != 2 {
		t.Errorf("CSV after a BOM: %d requests, %v; want 2", len(tr), err)
	}
	for _, c := range []struct{ data, want string }{
		{bom + `{"t": 1, "limiter": "a", "key": "k"}`, TraceJSONLines},
		{bom + "3 4 5\n", TraceCounts},
	} {
		if got := detectTraceFormat([]byte(c.data)); got != c.want {
			t.Errorf("%q read as %s, want %s", c.data, got, c.want)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.csv"), []byte("0,,a,k\n1.5,,a,k\n2,,a,k\n2.5,,a,k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const head = `{"config": {"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 5, "period": "1s"}]}, "trace": "t.csv", `
	sc, err := ParseScenario([]byte(head+`"trace_offset": "1s"}`), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.trace) != 3 || sc.trace[0].t != 5e8 || time.Duration(sc.Duration) != 1500*time.Millisecond+1 {
		t.Errorf("trace_offset 1s of requests at 0, 1.5, 2 and 2.5 s: %d requests from %d ns over %v; want 3 from 0.5 s over 1.5 s",
			len(sc.trace), sc.trace[0].t, time.Duration(sc.Duration))
	}
	if _, err := ParseScenario([]byte(head+`"trace_scale": 2}`), dir); err == nil || !strings.Contains(err.Error(), "only a counts trace") {
		t.Errorf("trace_scale 2 on a request trace: %v; want refused", err)
	}
}

// A counts trace's bin of more requests than bigBin is generated in order
// a part at a time (a count of 1e9 held 8 GB of request times): every
// request in its bin, in time order, as many as the count.
func TestCountsBigBinInOrder(t *testing.T) {
	c := &countsSource{counts: []float64{3, 3*bigBin + 5, 2}, bin: 1e9, scale: 1}
	rng := rand.New(rand.NewPCG(1, 2))
	var n, last int64
	perBin := map[int64]int64{}
	for c.fill(rng) {
		if len(c.times) > bigBin {
			t.Fatalf("%d times held at once; want at most %d", len(c.times), bigBin)
		}
		for _, x := range c.times {
			if x < last {
				t.Fatalf("request %d at %d after one at %d", n, x, last)
			}
			last = x
			perBin[x/1e9]++
			n++
		}
		c.times = c.times[:0]
	}
	if perBin[0] != 3 || perBin[1] != 3*bigBin+5 || perBin[2] != 2 || n != 3*bigBin+10 {
		t.Errorf("bins held %v; want 3, %d, 2", perBin, 3*bigBin+5)
	}
	// The big bin's times spread over the whole second: its first and last
	// tenths hold about a tenth each.
	c = &countsSource{counts: []float64{10 * bigBin}, bin: 1e9, scale: 1}
	var first, lastTenth int64
	for c.fill(rng) {
		for _, x := range c.times {
			switch {
			case x < 1e8:
				first++
			case x >= 9e8:
				lastTenth++
			}
		}
		c.times = c.times[:0]
	}
	if first < bigBin*9/10 || first > bigBin*11/10 || lastTenth < bigBin*9/10 || lastTenth > bigBin*11/10 {
		t.Errorf("first and last tenths of a bin of %d: %d and %d; want about %d each", 10*bigBin, first, lastTenth, bigBin)
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
