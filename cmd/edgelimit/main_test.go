package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/benchmarks"
)

func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Main(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

func TestUsageAndUnknownCommand(t *testing.T) {
	_, stderr, err := run(t)
	if !errors.Is(err, errUsage) || !strings.Contains(stderr, "sim") || !strings.Contains(stderr, "coordinator") {
		t.Fatalf("no args: err %v, usage %q", err, stderr)
	}
	if _, _, err := run(t, "frobnicate"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown command: %v", err)
	}
}

// TestSimRunsAndIsDeterministic runs the main job, small, twice through
// the CLI: it prints a table with every strategy asked for, and the same
// seed gives the same bytes.
func TestSimRunsAndIsDeterministic(t *testing.T) {
	args := []string{"sim", "--isolates", "4", "--duration", "3s", "--sync", "100ms", "--quiet",
		"--strategies", "local-only,approximate,strict"}
	out1, _, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"local-only", "approximate", "strict", "overrun"} {
		if !strings.Contains(out1, s) {
			t.Errorf("sim output lacks %q:\n%s", s, out1)
		}
	}
	out2, _, err := run(t, args...)
	if err != nil || out1 != out2 {
		t.Fatalf("same seed, different output (err %v):\n%s\n---\n%s", err, out1, out2)
	}
	if _, _, err := run(t, "sim", "--sync", "banana"); err == nil {
		t.Fatal("bad --sync accepted")
	}
	// A missing corpus directory is named as missing (it said "no *.json
	// scenarios in" it).
	missing := filepath.Join(t.TempDir(), "nope")
	if _, _, err := run(t, "sim", "--corpus-dir", missing); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("--corpus-dir %s: %v; want the directory named missing", missing, err)
	}
	// With --corpus, a sync interval outside 1ms-1h is refused (1ns ran
	// for ever, 0s and -5s ran 100ms), and so are flags the corpus's
	// scenarios set (they were ignored without a word).
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sync", "1ns"}, "between 1ms and 1h"},
		{[]string{"--sync", "0s"}, "between 1ms and 1h"},
		{[]string{"--sync", "-5s"}, "between 1ms and 1h"},
		{[]string{"--isolates", "5", "--duration", "1s"}, "--duration, --isolates: not with --corpus"},
		{[]string{"--target-overrun", "1%"}, "--target-overrun: not with --corpus"},
		// Taken for the defaults before.
		{[]string{"--parallel", "0"}, "--parallel must be at least 1"},
		{[]string{"--target-points", "0"}, "--target-points must be at least 2"},
		{[]string{"--target-min", "-1s"}, "--target-min must be positive"},
	} {
		if _, _, err := run(t, append([]string{"sim", "--corpus", "--quiet"}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("sim --corpus %v: %v; want an error about %q", c.args, err, c.want)
		}
	}
}

func TestBenchRunsOneBenchmark(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a benchmark")
	}
	out, _, err := run(t, "bench", "-runs", "1", "-run", "x/time/rate")
	if err != nil || !strings.Contains(out, "x/time/rate AllowN") || !strings.Contains(out, "1.0x") {
		t.Fatalf("bench: %v\n%s", err, out)
	}
}

func TestEdgeFlags(t *testing.T) {
	if _, _, err := run(t, "edge", "--config", "/nonexistent/limits.json"); err == nil {
		t.Fatal("a missing config file was accepted")
	}
	if _, _, err := run(t, "edge", "-h"); err != nil {
		t.Fatalf("edge -h: %v", err)
	}
	for _, bad := range [][]string{{"--log-format", "xml"}, {"--log-level", "loud"}} {
		if _, _, err := run(t, append([]string{"edge"}, bad...)...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("edge %v: %v, want an error naming the flag", bad, err)
		}
	}
}

// The README's tuning command works: it prints the scanned curve and a
// pick (or says no interval meets the target), on a user's counts trace.
func TestSimTuneOnATrace(t *testing.T) {
	dir := t.TempDir()
	trace := dir + "/rps.txt"
	if err := os.WriteFile(trace, []byte("# requests per second\n4000 9000 12000 6000 3000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := run(t, "sim", "--trace", trace, "--strategies", "approximate", "--sync", "100ms", "--quiet",
		"--target-overrun", "1%", "--target-points", "3", "--target-max", "1s", "--seeds", "1,2")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"tuning approximate: worst key-window overrun <= 1%", "10ms", "1s", "scenario rps.txt: 64 isolates", "5s simulated"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "pick: sync every") && !strings.Contains(out, "no interval in the scan meets every bound") {
		t.Errorf("no answer:\n%s", out)
	}
	for _, want := range []string{"wait p99 <= 40ms (read from 12.5% wait buckets: up to 41.94ms), util >= 97%", "waited %", "wait p50", "util %"} {
		if !strings.Contains(out, want) {
			t.Errorf("the curve lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := run(t, "sim", "--target-overrun", "1%", "--target-metric", "mean"); err == nil {
		t.Error("unknown target metric accepted")
	}
	// Two strategies and none named: refused, naming the choices.
	_, _, err = run(t, "sim", "--strategies", "approximate,auto", "--target-overrun", "1%", "--quiet")
	if err == nil || !strings.Contains(err.Error(), "approximate, auto") || !strings.Contains(err.Error(), "--target-strategy") {
		t.Errorf("ambiguous strategy: %v, want a refusal naming approximate, auto and --target-strategy", err)
	}
	out, stderr, err = run(t, "sim", "--trace", trace, "--strategies", "approximate,auto", "--target-strategy", "auto",
		"--sync", "100ms", "--quiet", "--target-overrun", "1%", "--target-points", "2", "--target-max", "1s", "--seeds", "1",
		"--max-wait", "1s", "--min-util", "50%")
	if err != nil || !strings.Contains(out, "tuning auto: worst key-window overrun <= 1% of the limit, wait p99 <= 1s (read from 12.5% wait buckets: up to 1.00663s), util >= 50%") {
		t.Errorf("--target-strategy auto: %v\n%s%s", err, out, stderr)
	}
	// Bounds of 0 mean 0, not the defaults: a wait p99 of 0 (1ns at the
	// histogram's resolution) and no utilisation bound (before, --min-util
	// 0% tuned for 97%).
	out, stderr, err = run(t, "sim", "--trace", trace, "--strategies", "auto", "--sync", "100ms", "--quiet",
		"--target-overrun", "1%", "--target-points", "2", "--target-max", "1s", "--seeds", "1", "--max-wait", "0s", "--min-util", "0%")
	if err != nil || !strings.Contains(out, "tuning auto: worst key-window overrun <= 1% of the limit, wait p99 <= 1ns on every seed") {
		t.Errorf("--max-wait 0s --min-util 0%%: %v\n%s%s", err, out, stderr)
	}
}

// -h on every command prints its flags and succeeds.
func TestHelpSucceedsEverywhere(t *testing.T) {
	for name := range commands {
		if _, stderr, err := run(t, name, "-h"); err != nil || !strings.Contains(stderr, "-") {
			t.Errorf("%s -h: %v, %q", name, err, stderr)
		}
	}
}

// TestBenchReadme runs `bench -readme` with one cheap module benchmark and
// no system benchmarks: it prints a row for every row of the README's
// module table (measured or marked not run), the memory row with the
// module's figures, the simulator's table and the figures it leaves to
// their own commands.
func TestBenchReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("measures memory and runs the simulator")
	}
	out, _, err := run(t, "bench", "-readme", "-runs", "1", "-systems=false", "-flood-keys", "300000",
		"-run", `^(x/time/rate AllowN|native core, 1 hot key)$`)
	if err != nil {
		t.Fatalf("bench -readme: %v\n%s", err, out)
	}
	for _, n := range benchmarks.ModuleRows {
		if !strings.Contains(out, "| "+n+" | ") && !strings.Contains(out, "| "+n+" (") {
			t.Errorf("no row %q:\n%s", n, out)
		}
	}
	for _, s := range []string{
		"| " + benchmarks.RowModuleSize + " | " + benchmarks.KB(benchmarks.ModuleBytes()),
		"| " + benchmarks.RowMemory + " | 32 MiB (",
		"| " + benchmarks.RowFlood + " (here 300,000 keys) | memory plateaus at 32 MiB once the table is full (32 MiB at 300,000 keys); 200,000 evictions |",
		"| instantiate an isolate | (not run",
		"approximate",
		"Left to their own commands",
		"KeyFloodHTTP",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// listenAddr waits up to 10 s for the "listening on ADDR" line a command
// running in the test writes to stderr and returns ADDR.
func listenAddr(t *testing.T, name string, stderr *syncBuffer) string {
	t.Helper()
	re := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no listening line:\n%s", name, stderr.String())
		}
	}
}
