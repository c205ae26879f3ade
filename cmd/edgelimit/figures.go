package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/edgelimit/edgelimit/benchmarks"
)

// readmeLeft are the README's figures `edgelimit bench -readme` does not
// reproduce, each with the command that does (they take longer, or need
// node and workerd).
var readmeLeft = []string{
	"coordinator table (ingest, p99 sync latency, restarts): cd coordinator && go test -run '^$' -bench 'HTTP|Restart' -benchtime 1x .",
	"coordinator heap with 1M keys: go test -run '^$' -bench 'KeyFlood$' -benchtime 1x ./coordinator/",
	"coordinator RSS under a key flood: EDGELIMIT_FLOOD_KEYS=2000000 go test -run '^$' -bench KeyFloodHTTP -benchtime 1x ./coordinator/ (about a minute)",
	"coordinator 10-minute soak: EDGELIMIT_SOAK=10m go test -run '^$' -bench SteadyLoad -benchtime 1x -timeout 0 ./coordinator/",
	"simulator decisions/s and the sweep's time: go test -run '^$' -bench Decisions -benchtime 5x ./sim/; make demo",
	"accuracy corpus table: make accuracy (several minutes)",
	"token buckets and flash crowds: go run ./cmd/edgelimit sim --scenario flash-crowd --sync 100ms",
	"JavaScript figures (Node, workerd, the example Worker): make bench-js; recovery: make bench-recover",
}

// runReadme prints every README figure the bench reproduces, as rows of the
// README's tables (named as there: benchmarks.ModuleRows and the names of
// benchmarks.All and benchmarks.Systems), then the figures it leaves to
// their own commands.
func runReadme(ctx context.Context, re *regexp.Regexp, runs, floodKeys int, systems bool, sysDur time.Duration, stdout, stderr io.Writer) error {
	start := time.Now()
	fmt.Fprintf(stderr, "bench: README figures: memory, %d runs of each module benchmark, the simulator", runs)
	if systems {
		fmt.Fprintf(stderr, ", the system benchmarks (%s each)", sysDur)
	}
	fmt.Fprintln(stderr, "; a few minutes")
	at100k, growth, err := benchmarks.MemoryFigure(ctx)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	flood, err := benchmarks.MeasureMemory(ctx, floodKeys, 100_000, benchmarks.FloodKey)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	fmt.Fprintln(stderr, "bench: memory figures done")
	rows, err := measureModule(ctx, re, runs, stderr)
	if err != nil {
		return err
	}
	ns := map[string]benchRow{}
	for _, r := range rows {
		ns[r.name] = r
	}
	fig := map[string]string{}
	fig[benchmarks.RowModuleSize] = benchmarks.KB(benchmarks.ModuleBytes())
	if r, ok := ns["compile module"]; ok {
		fig[benchmarks.RowModuleSize] += fmt.Sprintf("; wazero compiles it in %.0f ms (`compile module`, wall time)", r.ns/1e6)
	}
	if r, ok := ns["instantiate isolate"]; ok {
		fig["instantiate an isolate"] = fmt.Sprintf("%.0f µs, %.0f KiB idle linear memory", r.ns/1e3, r.extra["idle-KiB"])
	}
	hot, okHot := ns["wazero fast path, 1 hot key"]
	if okHot {
		f := fmt.Sprintf("%.0f ns, %d allocations", hot.ns, hot.alloc)
		if x, ok := ns["x/time/rate AllowN"]; ok {
			f += fmt.Sprintf("; %.1fx x/time/rate's AllowN", hot.ns/x.ns)
		}
		if n, ok := ns["native core, 1 hot key"]; ok {
			f += fmt.Sprintf(", %.1fx the native core", hot.ns/n.ns)
		}
		fig["decision via wazero fast path, 1 hot key"] = f
	}
	if r, ok := ns["wazero fast path, 100k keys"]; ok {
		f := fmt.Sprintf("%.0f ns", r.ns)
		if n, ok := ns["native core, 100k keys"]; ok {
			f += fmt.Sprintf(" (the native core takes %.0f ns for the same pattern, `native core, 100k keys`)", n.ns)
		}
		fig["same, 100,000 keys"] = f
	}
	if r, ok := ns["Extism Go SDK Plugin.Call decide"]; ok && okHot {
		fig["same decision through the Extism Go SDK `Plugin.Call`"] = fmt.Sprintf("%.0fx the wazero fast path, %.0f KB allocated per call", r.ns/hot.ns, float64(r.bytes)/1000)
	}
	incr, ok1 := ns["Redis per decision: INCR+EXPIRE fixed window"]
	gcra, ok2 := ns["Redis per decision: GCRA Lua script"]
	if ok1 && ok2 && okHot {
		fig["a central limiter asking Redis per decision"] = fmt.Sprintf("INCR+EXPIRE fixed window %.0fx, GCRA Lua script %.0fx the wazero fast path in the same run (%.1f and %.1f µs against %.0f ns)",
			incr.ns/hot.ns, gcra.ns/hot.ns, incr.ns/1e3, gcra.ns/1e3, hot.ns)
	}
	fig[benchmarks.RowFlood] = fmt.Sprintf("memory plateaus at %s MiB once the table is full (%s MiB at 300,000 keys); %s evictions",
		benchmarks.MiB(flood.Linear), benchmarks.MiB(flood.AtCapFull), benchmarks.Thousands(flood.Stats.Evictions))

	fmt.Fprintf(stdout, "Module and host (README \"Measured figures\"; medians of %d runs, this machine, now):\n\n| measurement | figure |\n|---|---|\n", runs)
	for _, name := range benchmarks.ModuleRows {
		f, ok := fig[name]
		if !ok {
			f = "(not run: see the messages above)"
		}
		if name == benchmarks.RowFlood && floodKeys != 1_000_000 {
			name += fmt.Sprintf(" (here %s keys)", benchmarks.Thousands(int64(floodKeys)))
		}
		fmt.Fprintf(stdout, "| %s | %s |\n", name, f)
	}
	fmt.Fprintf(stdout, "\nJavaScript table's memory row (the same module under wazero; deterministic):\n\n| %s | %s |\n",
		benchmarks.RowMemory, benchmarks.FormatMemory(at100k, growth))

	fmt.Fprintf(stdout, "\nSimulator (`edgelimit sim --sync 100ms`, deterministic):\n\n")
	if err := commands["sim"].run(ctx, []string{"--sync", "100ms"}, stdout, stderr); err != nil {
		return fmt.Errorf("bench: sim: %w", err)
	}
	if systems {
		if err := readmeSystems(ctx, re, sysDur, ns, stdout, stderr); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "\nLeft to their own commands (README \"Measured figures\", \"Accuracy\", \"JavaScript\"):\n")
	for _, l := range readmeLeft {
		fmt.Fprintf(stdout, "- %s\n", l)
	}
	fmt.Fprintf(stderr, "bench: README figures in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// readmeSystems runs the system benchmarks matching re and prints the
// README's peers table: decide over HTTP, the decision cost of the module
// benchmarks in ns (GroupDecisionCost), then ingest; ratios are to the
// first row of each group.
func readmeSystems(ctx context.Context, re *regexp.Regexp, d time.Duration, ns map[string]benchRow, stdout, stderr io.Writer) error {
	defer benchmarks.StopSystems()
	type out struct{ name, figure, ratio string }
	groups := map[string][]out{}
	var order []string
	add := func(group, name, figure string, v float64, base *float64, higherIsBetter bool) {
		if _, ok := groups[group]; !ok {
			order = append(order, group)
		}
		ratio := "1"
		if *base == 0 {
			*base = v
		} else if higherIsBetter {
			ratio = fmt.Sprintf("%.2fx", v / *base)
		} else {
			ratio = fmt.Sprintf("%.0fx", v / *base)
		}
		groups[group] = append(groups[group], out{name, figure, ratio})
	}
	base := map[string]*float64{}
	baseOf := func(g string) *float64 {
		if base[g] == nil {
			base[g] = new(float64)
		}
		return base[g]
	}
	costDone := false
	for _, s := range benchmarks.Systems() {
		if s.Group == "ingest" && !costDone {
			// The decision cost group sits between the two system groups.
			costDone = true
			for _, name := range benchmarks.DecisionCostRows {
				if r, ok := ns[name]; ok {
					add(benchmarks.GroupDecisionCost, name, duration(r.ns), r.ns, baseOf(benchmarks.GroupDecisionCost), false)
				}
			}
		}
		r, ok, err := runSystem(ctx, s, re, d, stderr)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		add(s.Group, s.Name, fmt.Sprintf("%s/s, %.1f ms", benchmarks.Thousands(int64(r.PerSec)), float64(r.P99.Microseconds())/1e3), r.PerSec, baseOf(s.Group), true)
	}
	fmt.Fprintf(stdout, "\nPeers (README \"Measured figures\", second table; %s per system after a 1 s warm-up; ratios to each group's first row):\n\n| system | figure | ratio |\n|---|---|---|\n", d)
	for _, g := range order {
		fmt.Fprintf(stdout, "| **%s** | | |\n", g)
		for _, o := range groups[g] {
			fmt.Fprintf(stdout, "| %s | %s | %s |\n", o.name, o.figure, o.ratio)
		}
	}
	return nil
}

// duration formats ns nanoseconds as the README does: "736 ns", "56.4 µs".
func duration(ns float64) string {
	if ns < 1e3 {
		return fmt.Sprintf("%.0f ns", ns)
	}
	return fmt.Sprintf("%.1f µs", ns/1e3)
}
