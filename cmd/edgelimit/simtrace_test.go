package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --trace-format, --trace-scale and --trace-offset apply to the trace a
// --scenario file names when no --trace is given, over its trace_* fields
// (they were ignored without a word), and are refused, naming the flags,
// for a scenario without a trace.
func TestSimTraceFlagsApplyToScenarioTrace(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("bins.counts", "10\n10\n10\n")
	scenario := write("s.json", `{"name": "s", "config": {"limiters": [{"name": "api", "algorithm": "fixed_window", "limit": 1000, "period": "1s"}]},
		"isolates": 2, "locations": 1, "trace": "bins.counts", "trace_scale": 2}`)
	// admitted returns the simulated time and what central admitted.
	admitted := func(args ...string) (string, string) {
		t.Helper()
		out, stderr, err := run(t, append([]string{"sim", "--quiet", "--strategies", "central", "--scenario", scenario}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		var simulated, n string
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) > 7 && f[0] == "scenario" {
				simulated = f[7]
			}
			if len(f) > 3 && f[0] == "central" {
				n = f[3]
			}
		}
		return simulated, n
	}
	for _, tc := range []struct {
		args                        []string
		wantSimulated, wantAdmitted string
	}{
		{nil, "3s", "60"},
		{[]string{"--trace-scale", "5"}, "3s", "150"},
		{[]string{"--trace-offset", "2s"}, "1s", "20"},
		{[]string{"--trace-offset", "1s", "--trace-scale", "1", "--trace-format", "counts"}, "2s", "20"},
		{[]string{"--trace-offset", "1s", "--duration", "3s"}, "3s", "40"},
	} {
		if simulated, n := admitted(tc.args...); simulated != tc.wantSimulated || n != tc.wantAdmitted {
			t.Errorf("%v: %s simulated, %s admitted; want %s, %s", tc.args, simulated, n, tc.wantSimulated, tc.wantAdmitted)
		}
	}
	_, _, err := run(t, "sim", "--quiet", "--strategies", "central", "--scenario", scenario, "--trace-format", "requests")
	if err == nil || !strings.Contains(err.Error(), "read as requests") {
		t.Errorf("--trace-format requests on a counts trace: %v, want it read as requests (and refused)", err)
	}
	_, _, err = run(t, "sim", "--quiet", "--isolates", "2", "--duration", "1s", "--trace-scale", "2", "--trace-offset", "1s")
	if err == nil || !strings.Contains(err.Error(), "--trace-offset, --trace-scale") || !strings.Contains(err.Error(), "no trace") {
		t.Errorf("--trace-scale and --trace-offset on a scenario without a trace: %v, want them refused by name", err)
	}
}
