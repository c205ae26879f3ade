package sim

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	simOnce sync.Once
	simInst *Simulator
	simErr  error
)

func testSim(t testing.TB) *Simulator {
	t.Helper()
	simOnce.Do(func() { simInst, simErr = New(context.Background()) })
	if simErr != nil {
		t.Fatal(simErr)
	}
	return simInst
}

// small returns a prepared one-key scenario: isolates isolates, limit per
// second, offered rate req/s.
func small(t testing.TB, isolates int, limit int64, rate float64, arrival string, d time.Duration) *Scenario {
	t.Helper()
	data := []byte(`{"name": "t", "config": {"limiters": [{"name": "api", "algorithm": "fixed_window", "limit": 1, "period": "1s"}]}}`)
	sc, err := ParseScenario(data, "")
	if err != nil {
		t.Fatal(err)
	}
	sc.Config.Limiters[0].Limit = limit
	sc.Isolates, sc.Locations, sc.Duration = isolates, min(isolates, 2), Duration(d)
	sc.Traffic = []Traffic{{Limiter: "api", Rate: rate, Arrival: arrival}}
	if err := sc.Prepare(); err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestDeterminism(t *testing.T) {
	s := testSim(t)
	sc := small(t, 6, 200, 500, "poisson", 3*time.Second)
	sc.Network.Loss = 0.05
	sc.Network.Latency = Latency{Dist: "lognormal", Mean: Duration(15 * time.Millisecond), Sigma: 0.6}
	sc.Churn.Lifetime = Duration(2 * time.Second)
	if err := sc.Prepare(); err != nil {
		t.Fatal(err)
	}
	run := func(parallel int) []byte {
		rs, err := s.Sweep(context.Background(), sc, SweepOptions{Seed: 42, Parallel: parallel,
			Intervals: []time.Duration{20 * time.Millisecond, 200 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteJSON(&b, Report{Scenario: sc, Results: rs}); err != nil {
			t.Fatal(err)
		}
		if err := WriteCSV(&b, rs); err != nil {
			t.Fatal(err)
		}
		if err := WriteSVG(&b, "t", rs); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a, b := run(1), run(2)
	if !bytes.Equal(a, b) {
		t.Fatalf("same seed, different output:\n%s\n---\n%s", a, b)
	}
	// A different seed gives different traffic.
	r1, _ := s.Run(context.Background(), sc, Approximate, 20*time.Millisecond, 42, nil)
	r2, _ := s.Run(context.Background(), sc, Approximate, 20*time.Millisecond, 43, nil)
	if r1.Requests == r2.Requests && r1.Admitted == r2.Admitted {
		t.Fatal("seeds 42 and 43 gave the same run")
	}
}

// Each isolate decides alone: under uniform overload (every isolate offered
// more than the limit in every window) the fleet admits isolates x limit
// per window, an overrun of (isolates-1) x limit per window.
func TestLocalOnlyAnalyticOverrun(t *testing.T) {
	const isolates, limit, secs = 4, 10, 10
	sc := small(t, isolates, limit, isolates*limit*3, "constant", secs*time.Second)
	r, err := testSim(t).Run(context.Background(), sc, LocalOnly, time.Second, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(secs * (isolates*limit - limit)); r.Overrun != want {
		t.Fatalf("overrun %d, want %d (%+v)", r.Overrun, want, r)
	}
	if r.WorstOverrun != (isolates-1)*limit || r.WorstOverrunPct != 100*(isolates-1) {
		t.Fatalf("worst window %d (%.0f%%), want %d", r.WorstOverrun, r.WorstOverrunPct, (isolates-1)*limit)
	}
	if r.SyncRequests != 0 || r.CoordWrites != 0 {
		t.Fatal("local-only synced")
	}
}

func TestCentralNeverOverruns(t *testing.T) {
	sc := small(t, 8, 50, 400, "poisson", 5*time.Second)
	sc.Network.Loss = 0.1
	// A request that never reaches the counter (4 attempts lost) is denied;
	// under fail open it would be admitted unchecked.
	sc.FailPolicy = FailClosed
	sc.Network.Latency = Latency{Dist: "uniform", Min: Duration(time.Millisecond), Max: Duration(40 * time.Millisecond)}
	if err := sc.Prepare(); err != nil {
		t.Fatal(err)
	}
	r, err := testSim(t).Run(context.Background(), sc, Central, time.Second, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Overrun != 0 {
		t.Fatalf("central overran by %d", r.Overrun)
	}
	if r.Admitted == 0 || r.WaitP50 < Duration(2*time.Millisecond) || r.WaitP99 < r.WaitP50 {
		t.Fatalf("central admitted %d with latency p50 %v p99 %v", r.Admitted, time.Duration(r.WaitP50), time.Duration(r.WaitP99))
	}
	if r.SyncRequests <= r.Requests {
		t.Fatalf("with 10%% loss, %d round trips for %d requests: no retries", r.SyncRequests, r.Requests)
	}
}

// A token bucket under the rate for 20 s, then a flash crowd at 10x: leases
// left unused while the bucket refilled must not add up to a burst beyond
// the bucket's (they once did: 263% over in the first second).
func TestStrictBucketNeverOverrunsInAFlashCrowd(t *testing.T) {
	r := runBuiltin(t, "flash-crowd", 25*time.Second, Strict, 100*time.Millisecond)
	if r.Overrun != 0 || r.Admitted < r.Capacity/2 {
		t.Fatalf("strict token bucket: overrun %d (worst window %.1f%%), admitted %d of capacity %d",
			r.Overrun, r.WorstOverrunPct, r.Admitted, r.Capacity)
	}
}

// Strict with the fail policy closed: lost messages make syncs fail, the
// view stale, and the fail policy decides; under open (the default) an
// isolate then admits alone, as the edge host does
// (TestFailPoliciesOnLeasedLimitersInAPartition).
func TestStrictNeverOverrunsUnderLossAndChurn(t *testing.T) {
	sc := small(t, 8, 100, 300, "poisson", 8*time.Second)
	sc.FailPolicy = "closed"
	// 10% of messages lost: at 5% the amendments (up to two per batch)
	// answered the held requests of nearly every lost batch, and at 250 ms
	// no batch failed (3 with one amendment per batch).
	sc.Network.Loss = 0.1
	sc.Network.Timeout = Duration(200 * time.Millisecond)
	sc.Network.Latency = Latency{Dist: "lognormal", Mean: Duration(10 * time.Millisecond), Sigma: 0.5}
	sc.Churn.Lifetime = Duration(2 * time.Second)
	if err := sc.Prepare(); err != nil {
		t.Fatal(err)
	}
	for _, iv := range []time.Duration{20 * time.Millisecond, 250 * time.Millisecond} {
		r, err := testSim(t).Run(context.Background(), sc, Strict, iv, 5, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Evictions == 0 || r.SyncFailures == 0 {
			t.Fatalf("at %v: no churn (%d) or no lost messages (%d)", iv, r.Evictions, r.SyncFailures)
		}
		if r.Overrun != 0 {
			t.Errorf("strict at %v overran by %d (worst window %d; %d evictions, %d sync failures)",
				iv, r.Overrun, r.WorstOverrun, r.Evictions, r.SyncFailures)
		}
	}
}

func TestApproximateBeatsLocalOnly(t *testing.T) {
	sc := small(t, 16, 500, 1000, "poisson", 5*time.Second)
	s := testSim(t)
	loc, err := s.Run(context.Background(), sc, LocalOnly, 100*time.Millisecond, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	apx, err := s.Run(context.Background(), sc, Approximate, 100*time.Millisecond, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if apx.Overrun*4 > loc.Overrun || apx.SyncRequests == 0 {
		t.Fatalf("approximate overrun %d vs local-only %d, %d syncs", apx.Overrun, loc.Overrun, apx.SyncRequests)
	}
}

func TestScenarioRoundTrip(t *testing.T) {
	for _, name := range BuiltinScenarios() {
		sc, err := Builtin(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		a, err := sc.Encode()
		if err != nil {
			t.Fatal(err)
		}
		sc2, err := ParseScenario(a, "scenarios")
		if err != nil {
			t.Fatalf("%s: re-parse: %v\n%s", name, err, a)
		}
		b, _ := sc2.Encode()
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: round trip differs:\n%s\n---\n%s", name, a, b)
		}
	}
	for _, bad := range []string{
		`{"config": {"limiters": []}}`,
		`{"config": {"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 1, "period": "1s"}]}, "traffic": [{"rate": -1}]}`,
		`{"config": {"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 1, "period": "1s"}]}, "strategies": ["magic"]}`,
		`{"config": {"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 1, "period": "1s"}]}, "unknown": 1}`,
		`{"config": {"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 1, "period": "1s"}]}, "network": {"partitions": [{"start": "1s", "duration": "1s"}]}}`,
	} {
		if _, err := ParseScenario([]byte(bad), ""); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// scenarioIn writes the scenario js to dir/s.json (its trace paths are
// relative to dir) and loads it.
func scenarioIn(t *testing.T, dir, js string) *Scenario {
	t.Helper()
	p := filepath.Join(dir, "s.json")
	if err := os.WriteFile(p, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := LoadScenario(p)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestTraceReplay(t *testing.T) {
	dir := t.TempDir()
	abs, _ := filepath.Abs("testdata/small-trace.jsonl")
	js := `{"name": "trace", "isolates": 2, "locations": 2, "duration": "3s", "trace": "` + abs + `",
	 "config": {"limiters": [{"name": "api", "algorithm": "fixed_window", "limit": 2, "period": "1s"}]}}`
	sc := scenarioIn(t, dir, js)
	// Central is exact: window 0, key a: 1, 1 admitted, then cost 2 and 1
	// denied; key b: 1 admitted; window 1, key a: 1 admitted.
	r, err := testSim(t).Run(context.Background(), sc, Central, time.Second, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Admitted and denied are cost, as offered: 4 + 3 of 7.
	if r.Requests != 6 || r.Offered != 7 || r.Admitted != 4 || r.Denied != 3 || r.Overrun != 0 || r.Unserved != 0 {
		t.Fatalf("central on the trace: %+v", r)
	}
	// Local-only: isolate 0 sees a, b, and maybe the untargeted a;
	// isolate 1 sees a, a (cost 2: denied, 1+2 > 2), ... the fleet admits
	// more than the limit in window 0 only if both isolates admit key a.
	r, err = testSim(t).Run(context.Background(), sc, LocalOnly, time.Second, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 6 || r.Overrun < 1 {
		t.Fatalf("local-only on the trace: %+v", r)
	}

	// The shipped CSV trace scenario runs too.
	sc, err = Builtin("crm-trace")
	if err != nil {
		t.Fatal(err)
	}
	r, err = testSim(t).Run(context.Background(), sc, Approximate, time.Second, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != int64(len(sc.trace)) {
		t.Fatalf("replayed %d of %d requests", r.Requests, len(sc.trace))
	}
}

func TestParseTraceErrors(t *testing.T) {
	for _, bad := range []string{
		"x,iso:1,api,k,1\n0.5,iso:1,api,k,1\nzz,iso:1,api,k",
		"0.1,host:1,api,k,1",
		"-1,iso:1,api,k,1",
		"0.1,iso:1,api,,1",
		"0.1,iso:1,api,k,0",
	} {
		if _, err := ParseTrace([]byte(bad), false); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, err := ParseTrace([]byte(`{"t": 1, "isolate": 1, "location": 1, "limiter": "a", "key": "k"}`), true); err == nil {
		t.Error("accepted isolate and location together")
	}
	ev, err := ParseTrace([]byte("# c\nt,target,limiter,key,cost\n0.2,,api,k\n0.1,loc:1,api,k,3\n"), false)
	if err != nil || len(ev) != 2 || ev[0].t != 1e8 || ev[0].location != 1 || ev[0].cost != 3 || ev[1].cost != 1 {
		t.Fatalf("%+v %v", ev, err)
	}
}

func TestHistogram(t *testing.T) {
	var h histogram
	for i := int64(1); i <= 1000; i++ {
		h.add(i * 1000)
	}
	p50, p99 := h.quantile(0.5), h.quantile(0.99)
	if p50 < 500_000 || p50 > 500_000*9/8+1 || p99 < 990_000 || p99 > 990_000*9/8+1 {
		t.Fatalf("p50 %d p99 %d", p50, p99)
	}
}

// BenchmarkDecisions measures simulated decisions per second through the
// real wasm isolates (local-only: decisions only; approximate: with syncs
// through the coordinator), on the default scenario (60 simulated seconds, as in a sweep: the
// isolates' set-up is a fixed cost per run).
func BenchmarkDecisions(b *testing.B) {
	for _, st := range []string{LocalOnly, Approximate} {
		b.Run(st, func(b *testing.B) {
			s := testSim(b)
			sc, err := Builtin("default")
			if err != nil {
				b.Fatal(err)
			}
			sc.Duration = Duration(60 * time.Second)
			var n int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := s.Run(context.Background(), sc, st, 100*time.Millisecond, 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				n += r.Requests
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// The approximate-mode figure on the default scenario (64 isolates,
// one key at 2x its limit, 100 ms): no window over by more than 1% of the
// limit, and the limit used (utilisation >= 95%). Deterministic: a change
// of the module's estimator that breaks it fails here.
func TestApproximateDefaultScenarioWorstWindow(t *testing.T) {
	r := runBuiltin(t, "default", 20*time.Second, Approximate, 100*time.Millisecond)
	if r.WorstOverrunPct > 1 || r.Utilisation < 95 {
		t.Fatalf("approximate at 100 ms: worst window %.2f%% over, utilisation %.1f%%", r.WorstOverrunPct, r.Utilisation)
	}
}

// runBuiltin runs the built-in scenario name, shortened to d, with one
// strategy and sync interval (seed 1).
// runScenario prepares sc (after a test changed it) and runs strategy at
// a 100 ms sync interval with seed 1.
func runScenario(t *testing.T, sc *Scenario, strategy string) Result {
	t.Helper()
	if err := sc.Prepare(); err != nil {
		t.Fatal(err)
	}
	r, err := testSim(t).Run(t.Context(), sc, strategy, 100*time.Millisecond, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func runBuiltin(t *testing.T, name string, d time.Duration, strategy string, interval time.Duration) Result {
	t.Helper()
	sc, err := Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = Duration(d)
	r, err := testSim(t).Run(context.Background(), sc, strategy, interval, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The tuner scans the whole grid over every seed and picks the largest
// interval that meets the target on all of them, even when a smaller
// interval misses it (overrun is not monotone in the interval).
func TestTuneScansTheGrid(t *testing.T) {
	sc, err := Builtin("default")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = Duration(5 * time.Second)
	tu, err := testSim(t).Tune(context.Background(), sc, TuneOptions{Strategy: Approximate, Target: 1,
		Min: 10 * time.Millisecond, Max: time.Second, Points: 5, Seeds: []uint64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tu.Curve) != 5 {
		t.Fatalf("scanned %d intervals, want 5", len(tu.Curve))
	}
	found := Duration(0)
	for _, p := range tu.Curve {
		if len(p.Results) != 2 {
			t.Fatalf("interval %v ran %d seeds, want 2", p.Interval, len(p.Results))
		}
		worst := math.Max(p.Results[0].WorstOverrunPct, p.Results[1].WorstOverrunPct)
		util := math.Min(p.Results[0].Utilisation, p.Results[1].Utilisation)
		wait := max(p.Results[0].WaitP99, p.Results[1].WaitP99)
		if p.Metric != worst || p.Meets != (worst <= 1 && util >= DefaultMinUtil && withinWait(wait, tu.MaxWait)) {
			t.Fatalf("interval %v: metric %.2f util %.1f wait %v meets %v, want %.2f", p.Interval, p.Metric, p.Utilisation,
				time.Duration(p.WaitP99), p.Meets, worst)
		}
		if p.Meets {
			found = p.Interval
		}
	}
	if tu.Found != (found > 0) || tu.Interval != found {
		t.Fatalf("picked %v (found %v), want the largest meeting interval %v", tu.Interval, tu.Found, found)
	}
	// The 1 s interval (as long as the window) cannot meet 1%.
	if last := tu.Curve[len(tu.Curve)-1]; last.Meets {
		t.Errorf("1s interval met the target: %+v", last.Metric)
	}
	if _, err := testSim(t).Tune(context.Background(), sc, TuneOptions{Metric: "mean"}); err == nil {
		t.Error("unknown metric accepted")
	}
}

// Per key-window metrics: the p99 and share of windows over, and demand
// unserved with room, from a run whose windows are known.
func TestWindowMetrics(t *testing.T) {
	if q := windowQuantile([]float64{50, 10}, 100, 0.99); q != 10 {
		t.Errorf("p99 of 98 zeros, 10 and 50: %v, want 10", q)
	}
	if q := windowQuantile([]float64{50}, 1000, 0.99); q != 0 {
		t.Errorf("p99 of 999 zeros and 50: %v, want 0", q)
	}
	js := `{"name": "m", "isolates": 4, "locations": 1, "duration": "10s",
	 "config": {"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 10, "period": "1s"}]},
	 "traffic": [{"limiter": "a", "rate": 400, "arrival": "constant"}]}`
	sc, err := ParseScenario([]byte(js), "")
	if err != nil {
		t.Fatal(err)
	}
	// Local-only: each of 4 isolates admits 10 of the ~100 it sees: every
	// window is 300% over, nothing unserved with room.
	r, err := testSim(t).Run(context.Background(), sc, LocalOnly, time.Second, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.OverWindowsPct != 100 || r.P99OverrunPct != 300 || r.WorstOverrunPct != 300 || r.Unserved != 0 {
		t.Fatalf("local-only: over %.0f%% of windows, p99 %.0f%%, worst %.0f%%, unserved %d", r.OverWindowsPct,
			r.P99OverrunPct, r.WorstOverrunPct, r.Unserved)
	}
	// Central is exact: no window over, nothing unserved with room, though
	// 3 in 4 requests are denied.
	r, err = testSim(t).Run(context.Background(), sc, Central, time.Second, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.OverWindows != 0 || r.Unserved != 0 || r.Denied == 0 || r.Utilisation != 100 {
		t.Fatalf("central: %+v", r)
	}
}

// A counts trace (requests per second) replays with its scale and offset;
// without a duration the run lasts the trace's span; requests past the end
// are counted; the format comes from the content.
func TestCountsTrace(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.txt"), []byte("# per second\n10 20\n30\n40 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	js := `{"name": "c", "isolates": 2, "locations": 1, "trace": "c.txt", "trace_scale": 0.5, "trace_offset": "1s",
	 "config": {"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 1000, "period": "1s"}]}}`
	sc := scenarioIn(t, dir, js)
	if sc.Duration != Duration(4*time.Second) {
		t.Fatalf("duration %v, want the span after the offset, 4s", time.Duration(sc.Duration))
	}
	r, err := testSim(t).Run(context.Background(), sc, LocalOnly, time.Second, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 45 || r.TraceNotReplayed != 0 { // (20+30+40+0)/2
		t.Fatalf("replayed %d (not %d), want 45 and 0", r.Requests, r.TraceNotReplayed)
	}
	sc.Duration = Duration(2 * time.Second)
	r, err = testSim(t).Run(context.Background(), sc, LocalOnly, time.Second, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 25 || r.TraceNotReplayed != 20 {
		t.Fatalf("2s of the trace: replayed %d, not replayed %d, want 25 and 20", r.Requests, r.TraceNotReplayed)
	}
	// A request trace named .json is read as what it holds, and a bad
	// count names its line.
	if err := os.WriteFile(filepath.Join(dir, "r.json"), []byte("0.5,,a,k\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f := detectTraceFormat([]byte("0.5,,a,k\n")); f != TraceRequests {
		t.Errorf("csv detected as %s", f)
	}
	if _, err := parseCounts([]byte("1 2\n3 x\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad count: %v, want an error naming line 2", err)
	}
}

// Every corpus scenario loads, and the corpus runner folds seeds.
func TestCorpusLoads(t *testing.T) {
	names := CorpusScenarios()
	if len(names) < 10 {
		t.Fatalf("corpus has %d scenarios", len(names))
	}
	for _, n := range names {
		if _, err := Builtin("corpus/" + n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	sc, err := Builtin("corpus/under-0.8x")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = Duration(5 * time.Second)
	rows, err := testSim(t).RunCorpus(context.Background(), []*Scenario{sc}, CorpusOptions{
		Strategies: []string{LocalOnly, Central}, Seeds: []uint64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Seeds != 2 || rows[0].Overloaded {
		t.Fatalf("rows %+v", rows)
	}
	// 100 units per window: the wait targets apply, and central waits a
	// round trip for every request.
	if m := rows[1].Misses(); len(m) != 2 || !strings.HasPrefix(m[0], "wait p50") || m[1] != "waited 100%" {
		t.Errorf("central under the limit misses %v, want only the wait p50 and waited %% (a round trip per request)", m)
	}
	if r := rows[1]; r.CapacityPerWindow != 100 || r.WaitedPct != 100 || r.StrandedPct != 0 {
		t.Errorf("central: %.1f units per window, waited %.1f%%, stranded %.2f%%; want 100, 100, 0", r.CapacityPerWindow,
			r.WaitedPct, r.StrandedPct)
	}
}

// The default mode (auto) on the whole corpus, shortened: no key-window
// over its limit (kills included), at most one sync per decision, and no
// wait for the median request where isolates are busy. Approximate mode (the default
// before auto) fails the first on every overloaded row.
func TestCorpusDefaultModeTargets(t *testing.T) {
	var scs []*Scenario
	for _, n := range CorpusScenarios() {
		sc, err := Builtin("corpus/" + n)
		if err != nil {
			t.Fatal(err)
		}
		if n != "llm-6rps" && n != "quota" && sc.Duration > Duration(20*time.Second) {
			sc.Duration = Duration(20 * time.Second) // the sparse rows need their whole span for steady figures
		}
		scs = append(scs, sc)
	}
	rows, err := testSim(t).RunCorpus(context.Background(), scs, CorpusOptions{
		Strategies: []string{Auto, Approximate}, Seeds: []uint64{5}, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	approxOver := 0
	for _, r := range rows {
		switch r.Strategy {
		case Auto:
			// About one sync per decision at most: a request held while
			// a batch is in flight sends an amendment (wire/amend.go),
			// which a later held request may not share; quota, where
			// nearly every request waits for a lease, measures 102%.
			if r.WorstOverrunPct > 0 || r.SyncPerDecision > 105 {
				t.Errorf("%s auto: worst window %.2f%% over, %.1f%% sync per decision", r.Scenario, r.WorstOverrunPct, r.SyncPerDecision)
			}
			// Busy isolates on keys of >= 100 units per window (the
			// target's rows; sparse-1000's isolates are busy over 1,000
			// keys, 3 requests per key-window).
			if r.DecisionsPerIsolate >= 100 && r.CapacityPerWindow >= TargetBusyUnits && r.WaitP50 != 0 {
				t.Errorf("%s auto: busy isolates, yet the median request waited %v", r.Scenario, time.Duration(r.WaitP50))
			}
			// There a held request waits one round trip: its batch's
			// amendment is answered while the next batch is in flight
			// (holding that batch back cost bursty-5000 a 48.9 ms p99).
			if r.DecisionsPerIsolate >= 100 && r.CapacityPerWindow >= TargetBusyUnits && !withinWait(r.WaitP99, r.RoundTrip) {
				t.Errorf("%s auto: busy isolates, yet wait p99 %v against a round trip of %v", r.Scenario,
					time.Duration(r.WaitP99), time.Duration(r.RoundTrip))
			}
		case Approximate:
			if r.WorstOverrunPct > TargetWorstPct {
				approxOver++
			}
		}
	}
	if approxOver < len(scs)/2 {
		t.Errorf("approximate overran on %d of %d scenarios: the corpus no longer tells the modes apart", approxOver, len(scs))
	}
}

// A request trace with Unix timestamps starts at 0.
func TestTraceUnixTimes(t *testing.T) {
	tr, err := ParseTrace([]byte("t,target,limiter,key\n1763700000.5,,a,k\n1763700002.25,iso:1,a,k\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	// float64 seconds hold Unix times to about a microsecond
	if d := tr[1].t - 1_750_000_000; len(tr) != 2 || tr[0].t != 0 || d < -1000 || d > 1000 {
		t.Fatalf("times %d, %d; want 0 and 1.75 s", tr[0].t, tr[1].t)
	}
	if _, err := ParseTrace([]byte("2e10,,a,k\n"), false); err == nil {
		t.Fatal("a timestamp past 1e10 s was accepted")
	}
}

// Approximate mode has no overrun bound (README, "Modes"): at a limit of
// 6/s offered 12/s by 8 isolates its worst window is more than twice the
// limit.
func TestApproximateHasNoOverrunBound(t *testing.T) {
	sc, err := Builtin("approx-6rps")
	if err != nil {
		t.Fatal(err)
	}
	sc.Isolates = 8
	r, err := testSim(t).Run(context.Background(), sc, Approximate, 100*time.Millisecond, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.WorstOverrunPct <= 100 {
		t.Errorf("worst window %.1f%% over with 8 isolates; the README says +117-133%%", r.WorstOverrunPct)
	}
}

// Far from its limit, the default mode decides about half of the requests
// locally even where each isolate has a request every window or three
// (under-0.5x, under-0.2x): a sparse isolate stands with a unit in each
// window until it probably asked twice (coordinator/merge spanWindows).
// Before, a unit covered one window, and 66% and 87% of the requests
// waited a round trip (3 seeds).
func TestFarFromTheLimitDecidesLocally(t *testing.T) {
	var scs []*Scenario
	for _, n := range []string{"under-0.5x", "under-0.2x"} {
		sc, err := Builtin("corpus/" + n)
		if err != nil {
			t.Fatal(err)
		}
		scs = append(scs, sc)
	}
	rows, err := testSim(t).RunCorpus(context.Background(), scs, CorpusOptions{
		Strategies: []string{Auto}, Seeds: []uint64{1, 2, 3}, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		t.Logf("%s: waited %.1f%%, wait p50 %v, unserved %.2f%%, sync per decision %.1f%%", r.Scenario, r.WaitedPct,
			time.Duration(r.WaitP50), r.UnservedPct, r.SyncPerDecision)
		if r.WorstOverrunPct > 0 || r.UnservedPct > TargetUnservedPct || r.WaitedPct > 55 || r.SyncPerDecision > 70 {
			t.Errorf("%s auto: worst window %.2f%% over, unserved %.2f%%, wait p50 %v, waited %.1f%%, sync per decision %.1f%%; want exact, within the unserved target, at most 55%% waited and 70%% synced",
				r.Scenario, r.WorstOverrunPct, r.UnservedPct, time.Duration(r.WaitP50), r.WaitedPct, r.SyncPerDecision)
		}
	}
}
