package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
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
}
