package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Environment values are parsed and refused like the flags', naming the
// variable; the command line still wins over a bad one.
func TestEnvironmentValidatedLikeFlags(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		cmd, env, val, want string
	}{
		{"coordinator", "EDGELIMIT_CHECKPOINT_KEYS", "many", "EDGELIMIT_CHECKPOINT_KEYS for flag --checkpoint-keys"},
		{"coordinator", "EDGELIMIT_IN_MEMORY", "yes please", "EDGELIMIT_IN_MEMORY"},
		{"coordinator", "EDGELIMIT_STRAND_BUDGET", "lots", "EDGELIMIT_STRAND_BUDGET"},
		{"coordinator", "EDGELIMIT_LEASE_LIFE", "1w", "24h = 1d"},
		{"coordinator", "EDGELIMIT_LEASE_LIFE", "100000d", "EDGELIMIT_LEASE_LIFE for flag --lease-life: must be positive and at most 1h0m0s"},
		{"edge", "EDGELIMIT_LOG_LEVEL", "loud", "--log-level"},
		{"edge", "EDGELIMIT_COORDINATOR", "127.0.0.1:7070", "want http://HOST[:PORT]"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(tc.env, tc.val)
			_, _, err := run(t, tc.cmd, "--listen", "256.0.0.1:1")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), tc.cmd+": ") {
				t.Fatalf("%s=%q: %v, want an error with %q", tc.env, tc.val, err, tc.want)
			}
		})
	}
	// The flag wins over a bad variable.
	t.Setenv("EDGELIMIT_CHECKPOINT_KEYS", "many")
	err := runCoordinator(ctx, []string{"--in-memory", "--checkpoint-keys", "5", "--listen", "256.0.0.1:1"}, io.Discard, io.Discard)
	if err == nil || strings.Contains(err.Error(), "EDGELIMIT_CHECKPOINT_KEYS") {
		t.Fatalf("flag over a bad variable: %v", err)
	}
	// A good variable is used (in-memory: no --data error; the listen address then fails).
	t.Setenv("EDGELIMIT_CHECKPOINT_KEYS", "")
	t.Setenv("EDGELIMIT_IN_MEMORY", "true")
	t.Setenv("EDGELIMIT_LEASE_LIFE", "1h")
	if err := runCoordinator(ctx, []string{"--listen", "256.0.0.1:1"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
		t.Fatalf("good variables: %v, want the listen error", err)
	}
}

func TestCheckCoordinatorURLs(t *testing.T) {
	for _, ok := range []string{"", "http://127.0.0.1:7070", "https://limits.example.com", "http://a:1, http://b:2/", "http://[::1]:7070"} {
		if err := checkCoordinatorURLs(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"127.0.0.1:7070", "limits.example.com", "ftp://a", "http://", "http://a:1,b:2", ",", "http:///x"} {
		if err := checkCoordinatorURLs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Durations take days, on the command line and in the config file; a bad
// one says how to write one.
func TestDurationsTakeDays(t *testing.T) {
	if _, _, err := run(t, "sim", "--sync", "1w"); err == nil || !strings.Contains(err.Error(), "24h = 1d") {
		t.Errorf("--sync 1w: %v, want the hint", err)
	}
	if _, _, err := run(t, "edge", "--stale-after", "1w"); err == nil || !strings.Contains(err.Error(), "24h = 1d") {
		t.Errorf("--stale-after 1w: %v, want the hint", err)
	}
	p := filepath.Join(t.TempDir(), "c.json")
	cfg := `{"coordinator": {"in-memory": true, "lease-life": "1h", "listen": "256.0.0.1:1"},
 "limiters": [{"name": "d", "algorithm": "fixed_window", "limit": 5, "period": "1d"}]}`
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runCoordinator(context.Background(), []string{"--config", p}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
		t.Errorf("a config in days: %v, want the listen error", err)
	}
}

// A JSON syntax error in the config file says its line and column.
func TestConfigSyntaxErrorLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(p, []byte("{\"limiters\": [\n  {\"name\": \"a\",}\n]}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"coordinator", "edge"} {
		_, _, err := run(t, cmd, "--in-memory", "--config", p)
		if cmd == "edge" {
			_, _, err = run(t, cmd, "--config", p)
		}
		if err == nil || !strings.Contains(err.Error(), "line 2, column 16") {
			t.Errorf("%s: %v, want line 2, column 16", cmd, err)
		}
	}
}

// `edgelimit version` prints the module, protocol and build; errors carry
// no "edgelimit:" prefix of their own (main adds the one).
func TestVersionAndOnePrefix(t *testing.T) {
	out, _, err := run(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"edgelimit ", "protocol  1", "module    edgelimit.wasm, ", "sha256 ", "go        go1."} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
	for _, args := range [][]string{{"frobnicate"}, {"version", "extra"}, {"edge", "--coordinator", "x"}, {"coordinator"}} {
		var errb bytes.Buffer
		err := Main(context.Background(), args, io.Discard, &errb)
		if err == nil || strings.HasPrefix(err.Error(), "edgelimit") {
			t.Errorf("%v: %v, want an error without the prefix", args, err)
		}
	}
}

// A bad flag is one line naming the flag and where the usage is; the
// usage itself is printed for -h only.
func TestBadFlagIsOneLine(t *testing.T) {
	for _, cmd := range []string{"coordinator", "edge", "sim", "bench", "version"} {
		_, stderr, err := run(t, cmd, "--no-such-flag")
		if err == nil || !strings.Contains(err.Error(), "no-such-flag") || !strings.Contains(err.Error(), "run edgelimit "+cmd+" -h") {
			t.Errorf("%s --no-such-flag: error %v, want the flag and the -h hint", cmd, err)
		}
		if stderr != "" {
			t.Errorf("%s --no-such-flag printed %q before the error, want nothing", cmd, stderr)
		}
		if _, stderr, err := run(t, cmd, "-h"); err != nil || !strings.Contains(strings.ToLower(stderr), "usage") {
			t.Errorf("%s -h: error %v, usage %q", cmd, err, stderr)
		}
	}
}
