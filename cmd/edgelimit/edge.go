package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

func init() {
	commands["edge"] = command{summary: "run an edge host: wasm isolates behind an HTTP API, synced with a coordinator", run: runEdge}
}

const edgeUsage = `usage: edgelimit edge [--config FILE] [--listen ADDR] [--coordinator URL] [--token T] [--isolates N] [--sync D]

Runs N isolates of the edge module behind an HTTP API:
  GET|POST /v1/decide?limiter=NAME&key=KEY[&cost=N]   200 allowed, 429 denied (Retry-After,
                                                    RateLimit and RateLimit-Policy headers)
  GET /healthz
With --coordinator, each isolate syncs its deltas with it every --sync interval.
Environment: EDGELIMIT_CONFIG, EDGELIMIT_COORDINATOR, EDGELIMIT_TOKEN (the flag wins).

flags:
`

// runEdge is the `edgelimit edge` subcommand.
func runEdge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("edge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, edgeUsage); fs.PrintDefaults() }
	config := fs.String("config", os.Getenv("EDGELIMIT_CONFIG"), "JSON configuration `FILE` with the limiters (default: the coordinator's built-in one)")
	listen := fs.String("listen", "127.0.0.1:8080", "listen `ADDR` (host:port)")
	coord := fs.String("coordinator", os.Getenv("EDGELIMIT_COORDINATOR"), "coordinator base `URL`, e.g. http://127.0.0.1:7070 (empty: no sync, each isolate alone)")
	token := fs.String("token", os.Getenv("EDGELIMIT_TOKEN"), "bearer `TOKEN` for the coordinator")
	isolates := fs.Int("isolates", host.DefaultIsolates, "number of isolates")
	interval := fs.Duration("sync", syncloop.DefaultInterval, "sync interval")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("edge: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("edge: unexpected argument %q", fs.Arg(0))
	}
	cfg := coordinator.DefaultConfig()
	if *config != "" {
		var err error
		if cfg, err = wire.LoadConfigFile(*config); err != nil {
			return fmt.Errorf("edge: %w", err)
		}
	}
	h, err := host.New(ctx, host.Options{Config: cfg, Isolates: *isolates, Coordinator: *coord, Token: *token,
		Sync: syncloop.Options{Interval: *interval}})
	if err != nil {
		return err
	}
	defer h.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	srv := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "edge: %d isolates listening on %s (coordinator %q)\n", *isolates, ln.Addr(), *coord)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("edge: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
