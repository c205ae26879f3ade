package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCoordinatorCLI: the subcommand's refusals, in process.
func TestCoordinatorCLI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "127.0.0.1:0"}, "--data DIR is required"},
		{[]string{"--in-memory", "--listen", "0.0.0.0:0"}, "without a token"},
		{[]string{"--in-memory", "--config", "/nonexistent.json"}, "no such file"},
		{[]string{"--in-memory", "extra"}, "unexpected argument"},
		{[]string{"--in-memory", "--token", "k1:edge=default,k2:writer"}, "role 1 of 1 is not edge"},
		{[]string{"--in-memory", "--token", "k1:edge=nope"}, `unknown limiter "nope"`},
		{[]string{"--in-memory", "--token", "k1,k1:read"}, "given twice"},
		{[]string{"--store", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"}, "want redis://HOST:PORT"},
		{[]string{"--store", "redis://127.0.0.1:1", "--listen", "127.0.0.1:0"}, "redisstore: 127.0.0.1:1"},
		// Settings that contradict each other or mean nothing.
		{[]string{"--in-memory", "--data", t.TempDir()}, "give --data DIR or --in-memory, not both"},
		{[]string{"--store", "redis://127.0.0.1:1", "--data", t.TempDir()}, "--store keeps the state in Redis"},
		{[]string{"--store", "redis://127.0.0.1:1", "--in-memory"}, "--store keeps the state in Redis"},
		{[]string{"--store", "redis://127.0.0.1:1", "--redis-wait", "-1"}, "--redis-wait -1"},
		{[]string{"--store", "redis://127.0.0.1:1", "--redis-buckets", "-7"}, "--redis-buckets -7"},
		{[]string{"--in-memory", "--listen", "127.0.0.1"}, `--listen "127.0.0.1": want HOST:PORT`},
	} {
		var stderr bytes.Buffer
		err := runCoordinator(ctx, tc.args, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "coordinator: ") {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
	// Settings from the config file's "coordinator" object, below the
	// environment and the command line.
	lims := `"limiters": [{"name": "api", "algorithm": "fixed_window", "limit": 5, "period": "1s"}]`
	file := func(coord string) string {
		p := filepath.Join(t.TempDir(), "edgelimit.json")
		if err := os.WriteFile(p, []byte(`{"coordinator": `+coord+`, `+lims+`}`), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fromFile := file(`{"in-memory": true, "listen": "256.0.0.1:1", "checkpoint-interval": "5s"}`)
	for _, tc := range []struct {
		args []string
		env  string // EDGELIMIT_LISTEN
		want string
	}{
		{[]string{"--config", file(`{"bogus": 1}`)}, "", `unknown setting "bogus"`},
		{[]string{"--config", file(`{"checkpoint-keys": "many"}`), "--in-memory"}, "", "coordinator.checkpoint-keys"},
		{[]string{"--config", file(`{"token": ["alpha", "beta"]}`), "--in-memory"}, "", "coordinator.token: want a string, a number or a boolean"},
		{[]string{"--config", file(`{"listen": null}`), "--in-memory"}, "", "coordinator.listen: want a string"},
		{[]string{"--config", fromFile}, "", "256.0.0.1:1"},                                       // the file's listen (and in-memory: no --data error)
		{[]string{"--config", fromFile}, "256.0.0.2:1", "256.0.0.2:1"},                            // the environment wins
		{[]string{"--config", fromFile, "--listen", "256.0.0.3:1"}, "256.0.0.2:1", "256.0.0.3:1"}, // the command line wins
	} {
		t.Setenv("EDGELIMIT_LISTEN", tc.env)
		var stderr bytes.Buffer
		err := runCoordinator(ctx, tc.args, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "coordinator: ") {
			t.Errorf("%v (EDGELIMIT_LISTEN=%q): err %v, want %q", tc.args, tc.env, err, tc.want)
		}
	}
	t.Setenv("EDGELIMIT_LISTEN", "")

	// In memory on loopback with the default config: serves until ctx ends.
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runCoordinator(ctx, []string{"--in-memory", "--listen", "127.0.0.1:0"}, io.Discard, &stderr)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(stderr.String(), "listening on") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := stderr.String(); !strings.Contains(s, "built-in default") || !strings.Contains(s, "shut down cleanly") {
		t.Fatalf("stderr:\n%s", s)
	}
}

// The coordinator's duration flags are checked as they are read, and the
// error names the flag: a lease life of 100,000 days was accepted (a dead
// edge's lease stranded for ever), a negative one was refused only by
// merge.MergerOptions, in nanoseconds.
func TestCoordinatorDurationFlagsBounded(t *testing.T) {
	for _, tc := range []struct{ flag, val, want string }{
		{"--lease-life", "100000d", `invalid value "100000d" for flag -lease-life: must be positive and at most 1h0m0s`},
		{"--lease-life", "-5s", `for flag -lease-life: must be positive and at most 1h0m0s (0 takes the default), got -5s`},
		{"--lease-grace", "2h", `for flag -lease-grace: must be positive and at most 1h0m0s`},
		{"--max-clock-skew", "1d", `for flag -max-clock-skew: must be positive and at most 1h0m0s`},
		{"--checkpoint-interval", "-1s", `for flag -checkpoint-interval: must be positive (0 takes the default), got -1s`},
	} {
		_, _, err := run(t, "coordinator", "--in-memory", tc.flag, tc.val, "--listen", "256.0.0.1:1")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.flag, tc.val, err, tc.want)
		}
	}
	// The bounds themselves are taken (the listen address then fails).
	for _, args := range [][]string{{"--lease-life", "1h"}, {"--lease-grace", "1ms"}, {"--max-clock-skew", "1h"}, {"--lease-life", "0"}} {
		_, _, err := run(t, append([]string{"coordinator", "--in-memory", "--listen", "256.0.0.1:1"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
			t.Errorf("%v: %v, want the listen error", args, err)
		}
	}
}
