package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/failpolicy"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/internal/hostcheck"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

func init() {
	commands["edge"] = command{summary: "run an edge host: wasm isolates behind an HTTP API, synced with a coordinator", run: runEdge}
}

const edgeUsage = `usage: edgelimit edge [--config FILE] [--listen ADDR] [--coordinator URL] [--token T] [--isolates N] [--sync D]
                     [--fail-policy open|closed|local-share] [--stale-after D] [--probe-interval D] [--retry-wait D] [--heartbeat D] ...

Runs N isolates of the edge module behind an HTTP API:
  GET|POST /v1/decide?limiter=NAME&key=KEY[&cost=N]   200 allowed, 429 denied (Retry-After,
                                                    RateLimit and RateLimit-Policy headers)
  GET /healthz    JSON; 503 when an isolate's syncs fail, or the coordinator (probed
                  when no isolate heard from it within --stale-after) does not answer
  GET /metrics    Prometheus text
With --coordinator, each isolate syncs its deltas with it every --sync interval; a
comma-separated list names coordinators sharing one Redis Cluster (coordinator --store
redis://...): each isolate prefers the one its id hashes to, a batch one
cannot take goes to the next at once, and the isolate returns to its own
when it answers again. When an
isolate's syncs fail and its view is stale (--stale-after), each limiter's "fail_policy"
(config file) or --fail-policy applies; an isolate merely idle is never stale, and one
whose sync is slow is not failing until the attempt has been in flight for a second (or
--stale-after if longer).
Environment: EDGELIMIT_CONFIG, EDGELIMIT_COORDINATOR, EDGELIMIT_TOKEN, EDGELIMIT_ALLOWED_HOSTS, EDGELIMIT_LOG_FORMAT,
EDGELIMIT_LOG_LEVEL (the flag wins; a bad value is refused as the flag's would be).
Durations take ns, us, ms, s, m, h or d (1d = 24h).

flags:
`

// edgeEnv names the environment variable of each edge flag that has one.
var edgeEnv = map[string]string{"config": "EDGELIMIT_CONFIG", "coordinator": "EDGELIMIT_COORDINATOR", "token": "EDGELIMIT_TOKEN",
	"allowed-hosts": "EDGELIMIT_ALLOWED_HOSTS",
	"log-format":    logEnv["log-format"], "log-level": logEnv["log-level"]}

// runEdge is the `edgelimit edge` subcommand.
func runEdge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("edge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, edgeUsage); fs.PrintDefaults() }
	config := fs.String("config", "", "JSON configuration `FILE` with the limiters (default: the coordinator's built-in one)")
	listen := fs.String("listen", "127.0.0.1:8080", "listen `ADDR` (host:port)")
	coord := fs.String("coordinator", "", "coordinator base `URL`, e.g. http://127.0.0.1:7070, or several comma-separated sharing one Redis Cluster (each isolate prefers the one its id hashes to; failed over between) (empty: no sync, each isolate alone)")
	token := fs.String("token", "", "bearer `TOKEN` for the coordinator")
	isolates := fs.Int("isolates", host.DefaultIsolates, "number of isolates")
	interval := durationFlag(fs, "sync", syncloop.DefaultInterval, "sync interval")
	policy := fs.String("fail-policy", wire.FailOpen, "fail policy of limiters whose config names none: open (decide alone, as approximate mode, in every mode), closed (deny), local-share (limit/isolates per window per key)")
	staleAfter := durationFlag(fs, "stale-after", 0, "while an isolate's syncs fail, how long after its last good sync its view turns stale: the fail policy applies (0: 3 sync intervals)")
	probeInterval := durationFlag(fs, "probe-interval", syncloop.DefaultProbeInterval, "while syncs fail, requests probe the coordinator past the backoff at most this often (and stale denials say Retry-After at most this); negative: no probes")
	retryWait := durationFlag(fs, "retry-wait", host.DefaultRetryWait, "how long a request the module answers with SyncRetry (strict lease miss, read-through) waits for a sync; negative: deny at once")
	heartbeat := durationFlag(fs, "heartbeat", host.DefaultHeartbeat, "the longest an isolate goes without a sync: an idle one sends an empty batch then, so the coordinator tells it from a dead one; negative: none")
	syncTimeout := durationFlag(fs, "sync-timeout", syncloop.DefaultHTTPTimeout, "bound on one sync round trip with the coordinator")
	shareIsolates := fs.Int("share-isolates", 0, "isolates across the fleet sharing the limits, the divisor of local-share (0: --isolates)")
	readTimeout := durationFlag(fs, "read-timeout", host.DefaultReadTimeout, "bound on reading a whole request, body included")
	writeTimeout := durationFlag(fs, "write-timeout", host.DefaultWriteTimeout, "bound on answering a request (must exceed --retry-wait)")
	idleTimeout := durationFlag(fs, "idle-timeout", host.DefaultIdleTimeout, "idle keep-alive connections are closed after this")
	maxBody := fs.Int64("max-body", host.DefaultMaxBodyBytes, "cap on a request body, bytes (larger: 413)")
	allowedHosts := fs.String("allowed-hosts", "", "on a loopback --listen, the comma-separated host `NAMES` answered besides localhost, *.localhost, 127.0.0.0/8 and [::1]; other Host headers are refused 403 (DNS rebinding); * answers any (default: none)")
	lf := addLogFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("edge: %w", err)
	}
	if err := applyEnv(fs, edgeEnv); err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	if err := checkCoordinatorURLs(*coord); err != nil {
		return fmt.Errorf("edge: --coordinator (or EDGELIMIT_COORDINATOR): %w", err)
	}
	log, err := lf.logger(stderr)
	if err != nil {
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
	fp, err := failpolicy.Parse(*policy)
	if err != nil {
		return fmt.Errorf("edge: --fail-policy: %w", err)
	}
	if *isolates < 1 || *isolates > host.MaxIsolates {
		return fmt.Errorf("edge: --isolates must be 1 to %d, got %d", host.MaxIsolates, *isolates)
	}
	if *staleAfter < 0 {
		return fmt.Errorf("edge: --stale-after must be >= 0, got %v", *staleAfter)
	}
	h, err := host.New(ctx, host.Options{Config: cfg, Isolates: *isolates, Coordinator: *coord, Token: *token,
		Sync: syncloop.Options{Interval: *interval, StaleAfter: *staleAfter, ProbeInterval: *probeInterval}, SyncTimeout: *syncTimeout,
		RetryWait: *retryWait, Heartbeat: *heartbeat, FailPolicy: fp, ShareIsolates: *shareIsolates, Logger: log,
		Server: host.ServerOptions{ReadTimeout: *readTimeout, WriteTimeout: *writeTimeout, IdleTimeout: *idleTimeout, MaxBodyBytes: *maxBody,
			AllowedHosts: hostcheck.Parse(*allowedHosts)}})
	if err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	defer h.Close()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	log.Info(fmt.Sprintf("edge: %d isolates listening on %s", *isolates, ln.Addr()), "addr", ln.Addr().String(),
		"isolates", *isolates, "coordinator", *coord, "fail_policy", fp.String(), "stale_after", h.StaleAfter())
	// SIGHUP's default action ended the process, its unsynced cost and
	// leases with it: the host has nothing to read again.
	onHUP(ctx, func() {
		log.Info("edge: SIGHUP ignored: the edge host reads nothing again (restart it to change its flags)")
	})
	if err := h.Serve(ctx, ln); err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	return nil
}
