package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgelimit/edgelimit/sim"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

func init() {
	commands["sim"] = command{summary: "simulate strategies and sync intervals on real isolates under virtual time", run: runSim}
}

// runSim runs the simulator: a sweep of strategies x sync intervals on a
// scenario, printed as a table, optionally written to --out, and optionally
// a search for the largest interval meeting --target-overrun.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: edgelimit sim [flags]\n\nbuilt-in scenarios: %s\n\nflags:\n", strings.Join(sim.BuiltinScenarios(), ", "))
		fs.PrintDefaults()
	}
	configPath := fs.String("config", "", "limiter config file (JSON, as for the coordinator); replaces the scenario's limiters")
	scenario := fs.String("scenario", "", "built-in scenario name or scenario file (default: the built-in \"default\")")
	syncList := fs.String("sync", "", "comma-separated sync intervals, e.g. 10ms,50ms,100ms,250ms,1s (default: the scenario's)")
	isolates := fs.Int("isolates", 0, "number of isolates (default: the scenario's)")
	duration := durationFlag(fs, "duration", 0, "simulated time (default: the scenario's)")
	seed := fs.Uint64("seed", 1, "random seed; the same seed gives the same output")
	strategies := fs.String("strategies", "", "comma-separated strategies: "+strings.Join(sim.AllStrategies, ",")+" (default: the scenario's)")
	out := fs.String("out", "", "directory to write results.csv, results.json, chart.svg and report.html to")
	timeline := fs.String("timeline", "", "with --out: the run whose admitted-per-window timeline report.html draws, strategy@interval (e.g. auto@100ms; local-only and central need no interval; default: the tuner's pick, else auto or strict nearest 100ms)")
	target := fs.String("target-overrun", "", "tune: scan sync intervals and pick the largest whose key-window overrun (--target-metric) stays within this on every seed, e.g. 1%, while the wait stays within --max-wait and the utilisation above --min-util")
	targetStrategy := fs.String("target-strategy", "", "strategy for --target-overrun (default: the one strategy --strategies names)")
	maxWait := durationFlag(fs, "max-wait", 0, "with --target-overrun: the largest wait p99 on every seed (default one round trip: twice the scenario's one-way latency; negative: no bound)")
	minUtil := fs.String("min-util", fmt.Sprintf("%g%%", sim.DefaultMinUtil), "with --target-overrun: the least utilisation on every seed (negative: no bound)")
	targetMetric := fs.String("target-metric", sim.MetricWorst, "what --target-overrun bounds: worst (the worst key-window, the \"worst win %\" column) or p99 (the 99th percentile key-window, \"p99 win %\"), % of the limit")
	targetMin := durationFlag(fs, "target-min", 10*time.Millisecond, "smallest sync interval --target-overrun scans")
	targetMax := durationFlag(fs, "target-max", 0, "largest sync interval --target-overrun scans (default: the smaller of 5s and a quarter of the duration)")
	targetPoints := fs.Int("target-points", 12, "number of intervals --target-overrun scans (log-spaced)")
	seedList := fs.String("seeds", "1,2,3", "seeds of every --target-overrun interval and of --corpus runs (comma-separated)")
	trace := fs.String("trace", "", "replay this trace (instead of the built-in scenario's traffic unless --scenario is given); its span is the duration unless --duration is set")
	traceFormat := fs.String("trace-format", "", "trace format: requests (CSV), jsonl or counts (requests per second); default: from the content"+traceFlagsNote)
	traceScale := fs.Float64("trace-scale", 0, "multiply a counts trace's counts (default 1; a request trace refuses other values)"+traceFlagsNote)
	traceOffset := durationFlag(fs, "trace-offset", 0, "skip the start of a trace (a counts trace's first bins, a request trace's requests before it)"+traceFlagsNote)
	parallel := fs.Int("parallel", 1, "runs at once (results do not depend on it)")
	corpus := fs.Bool("corpus", false, "run the scenario corpus (sim/scenarios/corpus, or --corpus-dir) at one sync interval (--sync, default 100ms) with every seed of --seeds, and print one table with the targets each row misses")
	corpusDir := fs.String("corpus-dir", "", "directory of scenario files for --corpus (default: the built-in corpus)")
	quiet := fs.Bool("quiet", false, "no progress bar")
	background := fs.String("background", "", "when the isolates sync: timers (every interval, as the edge host and Node) or requests (only around requests, as Cloudflare Workers with the JavaScript package's background: 'requests'); default: the scenario's, timers")
	strand := fs.Float64("strand-budget", 0, "the simulated coordinator's --strand-budget: share of a window's limit that units held ahead by sparse isolates may be expected to strand; more means fewer waits and less utilisation near the limit; negative: hold nothing ahead (default 0.01)")
	isosPerKey := fs.Int("max-isolates-per-key", 0, "the simulated coordinator's --max-isolates-per-key, `N` (1 to 65536; default 256)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sim: unexpected arguments %q", fs.Args())
	}
	// Values that were taken for the default without a word.
	if *isosPerKey < 0 || *isosPerKey > maxIsolatesPerKey {
		return fmt.Errorf("sim: --max-isolates-per-key %d: want 1 to %d (0: the coordinator's default)", *isosPerKey, maxIsolatesPerKey)
	}
	if *parallel < 1 {
		return fmt.Errorf("sim: --parallel must be at least 1, got %d", *parallel)
	}
	if *targetPoints < 2 {
		return fmt.Errorf("sim: --target-points must be at least 2, got %d", *targetPoints)
	}
	if *targetMin <= 0 {
		return fmt.Errorf("sim: --target-min must be positive, got %v", *targetMin)
	}

	if *corpus || *corpusDir != "" {
		// The corpus's scenarios are its own: a flag that would change
		// one scenario is refused rather than ignored (--isolates,
		// --duration, --scenario and the tuner's ran without a word).
		used := map[string]bool{"corpus": true, "corpus-dir": true, "sync": true, "strategies": true, "seeds": true,
			"parallel": true, "quiet": true, "out": true, "strand-budget": true, "background": true, "max-isolates-per-key": true}
		var ignored []string
		fs.Visit(func(f *flag.Flag) {
			if !used[f.Name] {
				ignored = append(ignored, "--"+f.Name)
			}
		})
		if len(ignored) > 0 {
			return fmt.Errorf("sim: %s: not with --corpus (its scenarios set them)", strings.Join(ignored, ", "))
		}
		return runCorpus(ctx, stdout, stderr, *corpusDir, *syncList, *strategies, *seedList, *parallel, *quiet, *out, *strand, *isosPerKey, *background)
	}
	sc, err := loadScenario(*scenario)
	if err != nil {
		return err
	}
	if *configPath != "" {
		data, err := os.ReadFile(*configPath)
		if err != nil {
			return fmt.Errorf("sim: config: %w", err)
		}
		var fc wire.FileConfig
		if _, err := wire.ParseConfigJSON(data); err != nil {
			return fmt.Errorf("sim: %w (in %s)", err, *configPath)
		}
		if err := jsonUnmarshal(data, &fc); err != nil {
			return fmt.Errorf("sim: config: %w", err)
		}
		sc.Config = fc
		if *scenario == "" {
			sc.Traffic = nil // the default traffic follows the first limiter of the config
		}
	}
	if *trace != "" {
		if *scenario == "" {
			sc.Traffic = nil // the trace is the traffic
			sc.Name, sc.Description = filepath.Base(*trace), ""
		}
		sc.SetTrace(*trace, *traceFormat, *traceScale, sim.Duration(*traceOffset))
		if *duration == 0 {
			sc.Duration = 0 // the trace's span
		}
	} else if err := applyTraceFlags(fs, sc, *traceFormat, *traceScale, sim.Duration(*traceOffset)); err != nil {
		return err
	}
	if *isolates != 0 {
		sc.Isolates = *isolates
		if sc.Locations > sc.Isolates {
			sc.Locations = sc.Isolates
		}
	}
	if *duration != 0 {
		sc.Duration = sim.Duration(*duration)
	}
	if *syncList != "" {
		sc.Sync = nil
		for _, s := range strings.Split(*syncList, ",") {
			d, err := wire.ParseDuration(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("sim: --sync: %w", err)
			}
			sc.Sync = append(sc.Sync, sim.Duration(d))
		}
	}
	if *background != "" {
		sc.Background = *background
	}
	if *strategies != "" {
		sc.Strategies = nil
		for _, s := range strings.Split(*strategies, ",") {
			sc.Strategies = append(sc.Strategies, strings.TrimSpace(s))
		}
	}
	if err := sc.Prepare(); err != nil {
		return err
	}
	if *timeline != "" {
		if err := checkTimeline(*timeline, *out, sc); err != nil {
			return err
		}
	}
	var targetPct float64
	if *targetMetric != sim.MetricWorst && *targetMetric != sim.MetricP99 {
		return fmt.Errorf("sim: --target-metric: want %s or %s, got %q", sim.MetricWorst, sim.MetricP99, *targetMetric)
	}
	var minUtilPct float64
	if *target != "" {
		if targetPct, err = parsePercent("--target-overrun", *target); err != nil {
			return err
		}
		if targetPct < 0 {
			return fmt.Errorf("sim: --target-overrun: want a percentage >= 0, got %q", *target)
		}
		if minUtilPct, err = parsePercent("--min-util", *minUtil); err != nil {
			return err
		}
		if *targetStrategy == "" && len(sc.Strategies) != 1 {
			return fmt.Errorf("sim: --target-overrun tunes one strategy and this run has %d (%s): give --strategies one of them, or --target-strategy",
				len(sc.Strategies), strings.Join(sc.Strategies, ", "))
		}
	}

	// The tuner's options and --out are checked before anything runs
	// (they were read after the sweep, or at the end of the tuning).
	var tune *sim.TuneOptions
	if *target != "" {
		seeds, err := parseSeeds(*seedList)
		if err != nil {
			return err
		}
		o := sim.TuneOptions{Strategy: *targetStrategy, Metric: *targetMetric, Target: targetPct, MaxWait: *maxWait,
			MinUtil: minUtilPct, Min: *targetMin, Max: *targetMax, Points: *targetPoints, Seeds: seeds, Parallel: *parallel}
		// Given as 0, the bounds mean 0 (TuneOptions reads 0 as its
		// default): a wait p99 of 0, a utilisation of at least 0% (no
		// bound). Before, --min-util 0% tuned for 97%.
		fs.Visit(func(f *flag.Flag) {
			switch {
			case f.Name == "max-wait" && o.MaxWait == 0:
				o.MaxWait = time.Nanosecond
			case f.Name == "min-util" && o.MinUtil == 0:
				o.MinUtil = -1
			}
		})
		if o, err = o.Resolve(sc); err != nil {
			return err
		}
		tune = &o
	}
	if *out != "" {
		if err := checkOutDir(*out); err != nil {
			return err
		}
	}

	s, err := sim.New(ctx)
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	s.StrandBudget = *strand
	s.MaxIsolatesPerKey = *isosPerKey

	fmt.Fprintf(stdout, "scenario %s: %d isolates in %d locations, %v simulated, seed %d\n", sc.Name, sc.Isolates, sc.Locations,
		time.Duration(sc.Duration), *seed)
	if sc.Description != "" {
		fmt.Fprintf(stdout, "%s\n", sc.Description)
	}
	fmt.Fprintln(stdout)
	bar := newProgressBar(stderr, *quiet)
	results, err := s.Sweep(ctx, sc, sim.SweepOptions{Seed: *seed, Parallel: *parallel, Progress: bar.set, Timeline: *out != ""})
	bar.done()
	if err != nil {
		return err
	}
	if err := sim.WriteTable(stdout, results); err != nil {
		return err
	}
	for _, r := range results {
		if r.Requests == 0 {
			// (Traffic that sends nothing read as a run that met every
			// target, utilisation 0%.)
			fmt.Fprintf(stderr, "sim: warning: %s sent no request in the simulated %v: its figures say nothing (check the traffic or trace)\n",
				r.Strategy, time.Duration(sc.Duration))
			break
		}
	}
	if n := results[0].TraceNotReplayed; n > 0 {
		fmt.Fprintf(stderr, "sim: warning: %d requests of the trace fall after the simulated %v and were not replayed (set --duration or the scenario's duration)\n",
			n, time.Duration(sc.Duration))
	}
	fmt.Fprint(stdout, "\n"+sim.Legend)

	var tgt *sim.Tuning
	if tune != nil {
		bar := newProgressBar(stderr, *quiet)
		tune.Progress = bar.set
		t, err := s.Tune(ctx, sc, *tune)
		bar.done()
		if err != nil {
			return err
		}
		tgt = &t
		writeTuning(stdout, t)
	}

	if *out != "" {
		if err := writeSimOut(*out, sim.Report{Scenario: sc, Results: results, Tuning: tgt, TimelineOf: *timeline}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join([]string{filepath.Join(*out, "results.csv"),
			filepath.Join(*out, "results.json"), filepath.Join(*out, "chart.svg"), filepath.Join(*out, "report.html")}, ", "))
	}
	return nil
}

func loadScenario(name string) (*sim.Scenario, error) {
	if name == "" {
		return sim.Builtin(sim.DefaultScenario)
	}
	if strings.HasSuffix(name, ".json") || strings.ContainsRune(name, os.PathSeparator) {
		return sim.LoadScenario(name)
	}
	return sim.Builtin(name)
}

// checkTimeline refuses a --timeline that names no run of this sweep.
func checkTimeline(choice, out string, sc *sim.Scenario) error {
	if out == "" {
		return fmt.Errorf("sim: --timeline draws in report.html: give --out too")
	}
	st, iv, err := sim.ParseTimelineChoice(choice)
	if err != nil {
		return err // "sim: timeline ...: want strategy@interval ..."
	}
	if !slices.Contains(sc.Strategies, st) {
		return fmt.Errorf("sim: --timeline %q: %s is not among the strategies run (%s)", choice, st, strings.Join(sc.Strategies, ", "))
	}
	if st == sim.LocalOnly || st == sim.Central {
		return nil
	}
	var ivs []string
	for _, d := range sc.Sync {
		if time.Duration(d) == iv {
			return nil
		}
		ivs = append(ivs, time.Duration(d).String())
	}
	return fmt.Errorf("sim: --timeline %q: %v is not among the sync intervals run (%s)", choice, iv, strings.Join(ivs, ", "))
}

// checkOutDir makes dir (the --out directory) if missing and checks that
// a file can be written there, so a run whose results could not be
// written is refused before it runs (it ran the whole sweep first).
func checkOutDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sim: --out: %w", err)
	}
	f, err := os.CreateTemp(dir, ".edgelimit-check-*")
	if err != nil {
		return fmt.Errorf("sim: --out: %s is not writable: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

func writeSimOut(dir string, rep sim.Report) error {
	sc, rs := rep.Scenario, rep.Results
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sim: out: %w", err)
	}
	write := func(name string, fn func(io.Writer) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("sim: out: %w", err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("sim: out: %w", err)
		}
		return nil
	}
	if err := write("results.csv", func(w io.Writer) error { return sim.WriteCSV(w, rs) }); err != nil {
		return err
	}
	if err := write("results.json", func(w io.Writer) error {
		return sim.WriteJSON(w, rep)
	}); err != nil {
		return err
	}
	if err := write("report.html", func(w io.Writer) error { return sim.WriteHTML(w, rep) }); err != nil {
		return err
	}
	return write("chart.svg", func(w io.Writer) error {
		return sim.WriteSVG(w, "edgelimit sim: "+sc.Name, rs)
	})
}

// progressBar draws a bar on stderr once a run has lasted a second, when
// stderr is a terminal. Kept by hand (40 lines) rather than a progress-bar
// library: it needs one bar, a fraction and the elapsed time.
type progressBar struct {
	mu    sync.Mutex
	w     io.Writer
	quiet bool
	start time.Time
	last  time.Time
	shown bool
}

func newProgressBar(w io.Writer, quiet bool) *progressBar {
	// A bar redraws itself with carriage returns: only on a terminal (in
	// a log file the frames would pile up).
	if f, ok := w.(*os.File); !ok || !isTerminal(f) {
		quiet = true
	}
	return &progressBar{w: w, quiet: quiet, start: time.Now()}
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progressBar) set(f float64) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Sub(p.start) < time.Second || now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last, p.shown = now, true
	f = min(max(f, 0), 1)
	const width = 40
	n := int(f * width)
	fmt.Fprintf(p.w, "\r[%s%s] %3.0f%% %5.1fs", strings.Repeat("#", n), strings.Repeat(" ", width-n), 100*f,
		now.Sub(p.start).Seconds())
}

func (p *progressBar) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", 60))
	}
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// parseSeeds reads a comma-separated list of seeds.
func parseSeeds(list string) ([]uint64, error) {
	var seeds []uint64
	for _, f := range strings.Split(list, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("sim: --seeds: want numbers separated by commas, got %q", list)
		}
		seeds = append(seeds, v)
	}
	return seeds, nil
}

// parsePercent reads a flag's percentage ("97%" or "97").
func parsePercent(name, v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), "%"), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("sim: %s: want a percentage like 1%%, got %q", name, v)
	}
	return f, nil
}

// writeTuning prints the scanned curve and the interval the tuner picked,
// or, when no interval meets every bound, the best figures measured.
func writeTuning(w io.Writer, t sim.Tuning) {
	bounds := fmt.Sprintf("%s key-window overrun <= %g%% of the limit", t.Metric, t.Target)
	if t.MaxWait >= 0 {
		bounds += fmt.Sprintf(", wait p99 <= %v", time.Duration(t.MaxWait))
		if c := t.WaitBoundChecked(); c != t.MaxWait {
			// (The header showed the bound asked for alone.)
			bounds += fmt.Sprintf(" (read from 12.5%% wait buckets: up to %s)", c.Short())
		}
	}
	if t.MinUtil >= 0 {
		bounds += fmt.Sprintf(", util >= %g%%", t.MinUtil)
	}
	fmt.Fprintf(w, "\ntuning %s: %s on every seed %v\n", t.Strategy, bounds, t.Seeds)
	fmt.Fprintf(w, "%10s %12s %9s %10s %10s %8s %11s %11s  %s\n", "interval", t.Metric+" win %", "waited %", "wait p50",
		"wait p99", "util %", "unserved %", "sync/dec %", "meets")
	for _, p := range t.Curve {
		var uns, spd float64
		for _, r := range p.Results {
			uns += r.UnservedPct / float64(len(p.Results))
			spd += r.SyncPerDecision / float64(len(p.Results))
		}
		mark := "yes"
		if !p.Meets {
			mark = "no: " + strings.Join(p.Misses, ", ")
		}
		fmt.Fprintf(w, "%10v %12.2f %9.1f %10s %10s %8.1f %11.2f %11.2f  %s\n", time.Duration(p.Interval), p.Metric,
			p.WaitedPct, p.WaitP50.Short(), p.WaitP99.Short(), p.Utilisation, uns, spd, mark)
	}
	fmt.Fprintln(w, "(per interval: the worst seed's overrun, wait and utilisation; the mean of the rest)")
	if !t.Found {
		fmt.Fprintf(w, "no interval in the scan meets every bound: none is recommended.\n")
		if len(t.Curve) > 0 {
			over, wait, util := t.Curve[0], t.Curve[0], t.Curve[0]
			for _, p := range t.Curve[1:] {
				if p.Metric < over.Metric {
					over = p
				}
				if p.WaitP99 < wait.WaitP99 {
					wait = p
				}
				// Closest to 100%: above it is overrun, not better use (an
				// interval 73% over was named best at 130%).
				if math.Abs(p.Utilisation-100) < math.Abs(util.Utilisation-100) {
					util = p
				}
			}
			fmt.Fprintf(w, "best measured: overrun %.2f%% (at %v), wait p99 %s (at %v), util %.1f%% (at %v)\n", over.Metric,
				time.Duration(over.Interval), wait.WaitP99.Short(), time.Duration(wait.Interval), util.Utilisation,
				time.Duration(util.Interval))
		}
		fmt.Fprintf(w, "widen the scan (--target-min, --target-max), relax a bound (--target-overrun, --max-wait, --min-util), or tune another strategy\n")
		return
	}
	fmt.Fprintf(w, "pick: sync every %v (the largest interval that meets every bound on every seed)\n", time.Duration(t.Interval))
}

// runCorpus runs the scenario corpus and prints its table.
func runCorpus(ctx context.Context, stdout, stderr io.Writer, dir, syncList, strategies, seedList string, parallel int, quiet bool, out string, strand float64, isosPerKey int, background string) error {
	var scs []*sim.Scenario
	if dir == "" {
		for _, n := range sim.CorpusScenarios() {
			sc, err := sim.Builtin("corpus/" + n)
			if err != nil {
				return err
			}
			scs = append(scs, sc)
		}
	} else {
		if _, err := os.ReadDir(dir); err != nil {
			return fmt.Errorf("sim: --corpus-dir: %w", err) // (it said "no scenarios" for a missing directory)
		}
		paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil || len(paths) == 0 {
			return fmt.Errorf("sim: --corpus-dir: no *.json scenarios in %s", dir)
		}
		for _, p := range paths {
			sc, err := sim.LoadScenario(p)
			if err != nil {
				return err
			}
			scs = append(scs, sc)
		}
	}
	if background != "" {
		for _, sc := range scs {
			sc.Background = background
			if err := sc.Validate(); err != nil {
				return fmt.Errorf("sim: --background: %w", err)
			}
		}
	}
	o := sim.CorpusOptions{Parallel: parallel}
	if syncList != "" {
		d, err := wire.ParseDuration(syncList)
		if err != nil {
			return fmt.Errorf("sim: --sync with --corpus: want one interval: %w", err)
		}
		if err := sim.CheckSyncInterval(d); err != nil {
			return fmt.Errorf("sim: --sync: %w", err)
		}
		o.Interval = d
	}
	if strategies != "" {
		for _, s := range strings.Split(strategies, ",") {
			o.Strategies = append(o.Strategies, strings.TrimSpace(s))
		}
	}
	seeds, err := parseSeeds(seedList)
	if err != nil {
		return err
	}
	o.Seeds = seeds
	if out != "" {
		if err := checkOutDir(out); err != nil {
			return err
		}
	}
	s, err := sim.New(ctx)
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	s.StrandBudget = strand
	s.MaxIsolatesPerKey = isosPerKey
	bar := newProgressBar(stderr, quiet)
	o.Progress = bar.set
	rows, err := s.RunCorpus(ctx, scs, o)
	bar.done()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "corpus: %d scenarios, seeds %v; worst and p99 windows are the worst over the seeds, the rest the mean\n\n", len(scs), seeds)
	if err := sim.WriteCorpusTable(stdout, rows); err != nil {
		return err
	}
	fmt.Fprint(stdout, "\n"+sim.Legend)
	fmt.Fprintf(stdout, "misses: targets a row misses: worst key-window <= %g%%; utilisation >= %g%% when offered exceeds the limit,\n"+
		"  unserved <= %g%% when it does not; wait p99 <= one round trip; where a key-window holds >= %g units, wait p50 = 0\n"+
		"  and waited <= %g%%; sync/dec <= %g%%, <= %g%% at >= 100 dec/s/iso\n",
		sim.TargetWorstPct, sim.TargetUtilisationPct, sim.TargetUnservedPct, sim.TargetBusyUnits, sim.TargetWaitedPct,
		sim.TargetSyncPct, sim.TargetBusySyncPct)
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("sim: out: %w", err)
		}
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return fmt.Errorf("sim: out: %w", err)
		}
		if err := os.WriteFile(filepath.Join(out, "corpus.json"), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("sim: out: %w", err)
		}
	}
	return nil
}
