package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGHUPIgnoredWhereNothingReloads: a coordinator started without
// --config and an edge host log SIGHUP and go on serving. Its default
// action ended them (exit 129, no clean shutdown: the coordinator's
// history minute, the edge's unsynced cost and leases lost). Without the
// handler this test's own process dies of the signal.
func TestSIGHUPIgnoredWhereNothingReloads(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(ctx context.Context, stderr io.Writer) error
		want string
	}{
		{"coordinator", func(ctx context.Context, stderr io.Writer) error {
			return runCoordinator(ctx, []string{"--in-memory", "--listen", "127.0.0.1:0"}, io.Discard, stderr)
		}, "coordinator: SIGHUP ignored"},
		{"edge", func(ctx context.Context, stderr io.Writer) error {
			return runEdge(ctx, []string{"--listen", "127.0.0.1:0", "--isolates", "1"}, io.Discard, stderr)
		}, "edge: SIGHUP ignored"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		var stderr syncBuffer
		done := make(chan error, 1)
		go func() { done <- c.run(ctx, &stderr) }()
		addr := listenAddr(t, c.name, &stderr)
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(stderr.String(), c.want); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no %q line after SIGHUP:\n%s", c.name, c.want, stderr.String())
			}
		}
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("%s after SIGHUP: %v", c.name, err)
		}
		resp.Body.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
