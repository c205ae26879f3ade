package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"sort"
	"testing"
	"text/tabwriter"

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
	if err := fs.Parse(args); err != nil {
		return err
	}
	re, err := regexp.Compile(*filter)
	if err != nil {
		return fmt.Errorf("bench: -run: %w", err)
	}
	type row struct {
		name         string
		ns           float64
		bytes, alloc int64
		extra        map[string]float64
	}
	var rows []row
	base := 0.0
	for _, bm := range benchmarks.All() {
		if !re.MatchString(bm.Name) {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ns []float64
		var last testing.BenchmarkResult
		for i := 0; i < *runs; i++ {
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
		r := row{name: bm.Name, ns: ns[len(ns)/2], bytes: last.AllocedBytesPerOp(), alloc: last.AllocsPerOp(), extra: last.Extra}
		if bm.Name == "x/time/rate AllowN" {
			base = r.ns
		}
		rows = append(rows, r)
		fmt.Fprintf(stderr, "bench: %s done\n", bm.Name)
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
	return tw.Flush()
}
