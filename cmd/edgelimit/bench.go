package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"sort"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/edgelimit/edgelimit/benchmarks"
)

func init() {
	commands["bench"] = command{summary: "side-by-side benchmarks of the module and its peers, as ratios", run: runBench}
}

// runBench runs each benchmark of package benchmarks several times and
// prints the median time per operation and its ratio to x/time/rate.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runs := fs.Int("runs", 5, "runs of each benchmark; the median is printed")
	filter := fs.String("run", "", "only benchmarks whose name matches this regular expression")
	systems := fs.Bool("systems", true, "also run the system benchmarks (servers on loopback: edge host vs central Redis limiters, coordinator ingest on Pebble and Redis Cluster vs Redis INCRBY)")
	sysDur := durationFlag(fs, "duration", 4*time.Second, "measured time of each system benchmark (after a 1s warm-up)")
	floodKeys := fs.Int("flood-keys", 1_000_000, "with -readme: distinct keys of the isolate flood figure (the README's: 1,000,000)")
	readme := fs.Bool("readme", false, "print every README figure this command reproduces (`make figures`), in the README's rows and units, then the ones it leaves to their own commands")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// (An argument ended the flags: "bench foo --run x" ran every benchmark.)
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("bench: unexpected argument %q (flags go before it)", fs.Arg(0))
	case *runs < 1:
		return fmt.Errorf("bench: --runs %d: want at least 1", *runs)
	case *sysDur <= 0:
		return fmt.Errorf("bench: --duration %v: want a positive duration", *sysDur)
	case *floodKeys < 1:
		return fmt.Errorf("bench: --flood-keys %d: want at least 1", *floodKeys)
	}
	re, err := regexp.Compile(*filter)
	if err != nil {
		return fmt.Errorf("bench: -run: %w", err)
	}
	if *readme {
		return runReadme(ctx, re, *runs, *floodKeys, *systems, *sysDur, stdout, stderr)
	}
	rows, err := measureModule(ctx, re, *runs, stderr)
	if err != nil {
		return err
	}
	base := 0.0
	for _, r := range rows {
		if r.name == "x/time/rate AllowN" {
			base = r.ns
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "benchmark\tmedian ns/op\tx x/time/rate\tB/op\tallocs/op\textra\n")
	for _, r := range rows {
		ratio := "-"
		if base > 0 {
			ratio = fmt.Sprintf("%.1fx", r.ns/base)
		}
		extra := ""
		keys := make([]string, 0, len(r.extra))
		for k := range r.extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			extra += fmt.Sprintf("%.0f %s ", r.extra[k], k)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%d\t%d\t%s\n", r.name, r.ns, ratio, r.bytes, r.alloc, extra)
	}
	if err := tw.Flush(); err != nil || !*systems {
		return err
	}
	return runSystems(ctx, re, *sysDur, stdout, stderr)
}

// benchRow is the median of one benchmark of package benchmarks.
type benchRow struct {
	name         string
	ns           float64
	bytes, alloc int64
	extra        map[string]float64
}

// measureModule runs each benchmark of package benchmarks matching re runs
// times and returns their medians, in the order of benchmarks.All.
func measureModule(ctx context.Context, re *regexp.Regexp, runs int, stderr io.Writer) ([]benchRow, error) {
	var rows []benchRow
	for _, bm := range benchmarks.All() {
		if !re.MatchString(bm.Name) {
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ns []float64
		var last testing.BenchmarkResult
		for i := 0; i < runs; i++ {
			last = testing.Benchmark(bm.F)
			if last.N == 0 {
				break // skipped (a peer that is not installed) or failed
			}
			ns = append(ns, float64(last.T.Nanoseconds())/float64(last.N))
		}
		if len(ns) == 0 {
			fmt.Fprintf(stderr, "bench: %s did not run (skipped: a peer not installed? `make tools` installs redis-server)\n", bm.Name)
			continue
		}
		sort.Float64s(ns)
		rows = append(rows, benchRow{name: bm.Name, ns: ns[len(ns)/2], bytes: last.AllocedBytesPerOp(), alloc: last.AllocsPerOp(), extra: last.Extra})
		fmt.Fprintf(stderr, "bench: %s done\n", bm.Name)
	}
	return rows, nil
}

// runSystems runs the system benchmarks matching re and prints them, each
// group as ratios to its first row.
func runSystems(ctx context.Context, re *regexp.Regexp, d time.Duration, stdout, stderr io.Writer) error {
	defer benchmarks.StopSystems()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	base := map[string]float64{}
	group := ""
	for _, s := range benchmarks.Systems() {
		r, ok, err := runSystem(ctx, s, re, d, stderr)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if len(base) == 0 {
			fmt.Fprintf(tw, "\nsystem (servers on loopback)\tthroughput\tratio\tp99\terrors\n")
		}
		if s.Group != group {
			group = s.Group
			fmt.Fprintf(tw, "%s:\t\t\t\t\n", group)
		}
		if _, ok := base[s.Group]; !ok {
			base[s.Group] = r.PerSec
		}
		fmt.Fprintf(tw, "  %s\t%.0f %s\t%.2fx\t%s\t%d\n", s.Name, r.PerSec, s.Unit, r.PerSec/base[s.Group], r.P99.Round(time.Microsecond), r.Errors)
	}
	return tw.Flush()
}

// runSystem runs system s for d when re matches its "group: name": ok is
// false when it does not match or cannot run here (no Redis: said on
// stderr).
func runSystem(ctx context.Context, s benchmarks.System, re *regexp.Regexp, d time.Duration, stderr io.Writer) (benchmarks.SystemResult, bool, error) {
	if !re.MatchString(s.Group + ": " + s.Name) {
		return benchmarks.SystemResult{}, false, nil
	}
	if ctx.Err() != nil {
		return benchmarks.SystemResult{}, false, ctx.Err()
	}
	r, err := s.Run(ctx, d)
	if err != nil {
		if errors.Is(err, benchmarks.ErrNoRedis) {
			fmt.Fprintf(stderr, "bench: %s did not run: %v\n", s.Name, err)
			return r, false, nil
		}
		return r, false, fmt.Errorf("bench: %s: %w", s.Name, err)
	}
	fmt.Fprintf(stderr, "bench: %s done\n", s.Name)
	return r, true, nil
}
