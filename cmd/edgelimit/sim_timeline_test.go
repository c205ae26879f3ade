package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimOutTimeline: --out records each run's timeline in results.json
// and report.html draws the run --timeline names; a --timeline naming no
// run of the sweep, or without --out, is refused before anything runs.
func TestSimOutTimeline(t *testing.T) {
	dir := t.TempDir()
	_, stderr, err := run(t, "sim", "--isolates", "4", "--duration", "3s", "--sync", "100ms,200ms", "--quiet",
		"--strategies", "local-only,strict", "--out", dir, "--timeline", "strict@200ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `id="chart-timeline"`) || !strings.Contains(string(page), ": strict at 200ms</figcaption>") {
		t.Errorf("report.html lacks the timeline of strict at 200ms")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []struct {
			Strategy string `json:"strategy"`
			Timeline *struct {
				Admitted []int64 `json:"admitted"`
			} `json:"timeline"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Timeline == nil || len(r.Timeline.Admitted) != 3 {
			t.Errorf("%s: timeline %+v, want 3 windows of 1s", r.Strategy, r.Timeline)
		}
	}
	for args, want := range map[string]string{
		"--out " + dir + " --timeline strict@300ms": "300ms is not among the sync intervals run (100ms, 200ms)",
		"--out " + dir + " --timeline auto@100ms":   "auto is not among the strategies run",
		"--out " + dir + " --timeline strict":       "strict needs an interval",
		"--timeline strict@100ms":                   "give --out too",
	} {
		a := append([]string{"sim", "--sync", "100ms,200ms", "--strategies", "local-only,strict", "--quiet"}, strings.Fields(args)...)
		if _, _, err := run(t, a...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// The tuner's options and --out are refused before anything runs: a
// scan past the run's length, or an --out that cannot be written, was
// refused only after the whole sweep had run (the tuning's options after
// the sweep, --out after the tuning too).
func TestSimRefusesBeforeItRuns(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--target-overrun", "1%", "--target-max", "20s"}, "no longer than the run"},
		{[]string{"--target-overrun", "1%", "--target-metric", "p99", "--target-min", "2s", "--target-max", "1s"}, "min <= max"},
		{[]string{"--out", filepath.Join(file, "out")}, "sim: --out"},
		{[]string{"--target-overrun", "1%", "--out", filepath.Join(file, "out")}, "sim: --out"},
	} {
		args := append([]string{"sim", "--duration", "5s", "--strategies", "auto", "--sync", "100ms", "--quiet"}, tc.args...)
		stdout, _, err := run(t, args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
		if stdout != "" {
			t.Errorf("%v: refused after it ran: %q", tc.args, stdout)
		}
	}
}
