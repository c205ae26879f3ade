package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/internal/gctune"
	"github.com/edgelimit/edgelimit/internal/hostcheck"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

func init() {
	commands["coordinator"] = command{
		summary: "run the coordinator server (Pebble, or Redis Cluster with --store)",
		run:     runCoordinator,
	}
}

const cliUsage = `usage: edgelimit coordinator --data DIR [--listen ADDR] [--config FILE] [--token T] [--in-memory] [--insecure]
       [--checkpoint-keys N] [--checkpoint-interval D] [--max-clock-skew D] [--tls-cert FILE --tls-key FILE]
       [--lease-life D] [--lease-grace D] [--strand-budget F] [--max-isolates-per-key N] [--max-memory SIZE] [--disk-reserve SIZE] [--history-keys N]
       [--token-keys N] [--token-isolates N] [--token-marks N]
   or: edgelimit coordinator --store redis://HOST:PORT[,HOST:PORT...] [--redis-wait N [--redis-wait-degraded]] [--redis-buckets N] [--listen ADDR] ...

Runs the coordinator: merges isolates' sync batches exactly once into Pebble
in DIR and serves POST /v1/sync, GET|DELETE /v1/limiters/{name}/keys/{key},
GET /healthz and GET /metrics.

With --store redis://..., the state lives in Redis instead: a Redis
Cluster (the seed nodes given), one standalone server, or a master found
through Sentinels (?sentinel=NAME); rediss:// for TLS (?ca=FILE); the user
and password from EDGELIMIT_REDIS_USERNAME and EDGELIMIT_REDIS_PASSWORD
(the Sentinels': EDGELIMIT_REDIS_SENTINEL_USERNAME and _PASSWORD).
Coordinators become a stateless tier, any of
them serves any isolate, and edges may list several and fail over between
them. Redis replicates asynchronously: a delta acknowledged by a master
that dies before its replica got it is lost, unless --redis-wait N makes
every write wait for N replicas (WAIT) before the batch is answered.
During a failover the coordinator reloads the slot map and retries a
batch's reads and writes for up to 3 s (within the request) rather than
answering 503; /healthz probes Redis (every master answers; with
--redis-wait, has N replicas online unless --redis-wait-degraded).

Each flag may also be set by an environment variable: EDGELIMIT_DATA,
EDGELIMIT_LISTEN, EDGELIMIT_CONFIG, EDGELIMIT_TOKEN, EDGELIMIT_IN_MEMORY,
EDGELIMIT_INSECURE, EDGELIMIT_ALLOWED_HOSTS, EDGELIMIT_CHECKPOINT_KEYS, EDGELIMIT_CHECKPOINT_INTERVAL,
EDGELIMIT_MAX_CLOCK_SKEW, EDGELIMIT_STORE, EDGELIMIT_REDIS_WAIT,
EDGELIMIT_REDIS_WAIT_DEGRADED, EDGELIMIT_REDIS_BUCKETS, EDGELIMIT_TLS_CERT, EDGELIMIT_TLS_KEY,
EDGELIMIT_MAX_MEMORY, EDGELIMIT_DISK_RESERVE, EDGELIMIT_HISTORY_KEYS, EDGELIMIT_LOG_FORMAT, EDGELIMIT_LOG_LEVEL;
and, but for --config, in the "coordinator" object of the config file, by
flag name: {"coordinator": {"data": "/var/lib/edgelimit", "listen":
"0.0.0.0:7070"}, "limiters": [...]}. The command line wins over the
environment, which wins over the file; each value is checked as the flag's.
Durations take ns, us, ms, s, m, h or d (1d = 24h). Prefer EDGELIMIT_TOKEN to --token
(command lines are visible to other users).

Group commits append to a log; a checkpoint writes the logged states to
their own records and empties the log, when --checkpoint-keys keys were
logged or --checkpoint-interval passed. Smaller values shorten the replay of
a restart after a crash and cost more writes.

--max-memory (default 768MiB) sizes the caches (key states: one per 3 KiB,
262144 at the default; Pebble's block cache: a twelfth) and sets the Go
memory limit to what remains after the block cache and a reserve for
memory outside the Go heap (32 MiB and an eighth: 576 MiB at the
default); a flood of distinct keys then levels off below it (evicted keys
live only in Pebble) from 192MiB on; under that, long keys go past it (a
flood of 256-byte keys peaked at 163-173 MiB at 128MiB in the README's
benchmark, more with larger batches). GOMEMLIMIT, if set, overrides the Go limit.

--disk-reserve (default 64MiB) is the free space the store's writes leave
on the disk of --data, for Pebble's own flushes and compactions: below it
syncs and /healthz answer 503 (nothing applied; edges retry) until space
is freed, and the server does not start (Pebble ends the process when a
write to its log finds the disk full). 1B turns it off.

The store keeps a usage history for the dashboard (/ui): per limiter and
per kept key, admitted, denied and paused cost per minute for 24 h and
per hour for 30 days, written once a minute and at shutdown. --history-keys
(default 1000) is how many keys per limiter it keeps; a new key replaces
one only after that one was idle for 24 h.

With --tls-cert and --tls-key the server speaks HTTPS (TLS 1.2 or later);
SIGHUP reads both files again (a renewed certificate serves new
connections; a pair that fails to load is logged and the old one stays).

SIGHUP also reads --config again: the limits and overrides it changed are
in force at once, as through the control API (PUT /v1/limiters/{name}/limit,
.../overrides/{key}; fleet pauses: POST .../pause[/{key}]), each logged as
an audit line. A file that does not load, or that changes anything else
(limiters added or removed, periods, algorithms: a restart), is refused
with a log line and the configuration in force stays.

Each bearer token is its own namespace of isolate ids. A token given alone
may do everything (one trusted fleet); TOKEN:ROLES gives it only ROLES,
joined by '+': edge (POST /v1/sync, for every limiter, or edge=api|llm for
those named), read (the dashboard's GETs and GET .../keys/{key}) and admin
(DELETE .../keys/{key}, the control API); other requests get 403. Example:
--token 'k1:edge=api|llm,k2:read+admin'. A batch whose time
is more than --max-clock-skew (default 2s) ahead of this server's clock, or
that names a window past this server's current one (the next one only when
it starts within --max-clock-skew), is refused (400 clock_skew), so keep
the edges' clocks synchronised (NTP).

flags:
`

// runCoordinator runs `edgelimit coordinator` with args (without the subcommand
// name) until ctx ends (SIGINT/SIGTERM in the CLI), then shuts down
// gracefully: stops accepting, finishes in-flight commits, closes Pebble.
// zeroOr accepts 0 (the option's default) and what check accepts.
func zeroOr(check func(time.Duration) error) func(time.Duration) error {
	return func(d time.Duration) error {
		if d == 0 {
			return nil
		}
		return check(d)
	}
}

// positive accepts a duration above 0, and 0 (the option's default).
func positive(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("must be positive (0 takes the default), got %v", d)
	}
	return nil
}

func runCoordinator(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, cliUsage); fs.PrintDefaults() }
	data := fs.String("data", "", "Pebble data `DIR`, created if missing (required unless --in-memory or --store)")
	listen := fs.String("listen", "127.0.0.1:7070", "listen `ADDR` (host:port)")
	config := fs.String("config", "", "JSON configuration `FILE` with the limiters (default: one limiter \"default\", fixed_window, 100 per 1s)")
	token := fs.String("token", "", "bearer `TOKEN`(s) required on /v1/*, comma-separated (one per edge); TOKEN:ROLES gives a token only ROLES (edge, edge=LIMITER|..., read, admin, joined by +)")
	inMemory := fs.Bool("in-memory", false, "keep state in memory only (nothing survives a restart)")
	insecure := fs.Bool("insecure", false, "allow serving without a token on a non-loopback address")
	allowedHosts := fs.String("allowed-hosts", "", "on a loopback --listen, the comma-separated host `NAMES` answered besides localhost, *.localhost, 127.0.0.0/8 and [::1] (a reverse proxy's); other Host headers are refused 403 (DNS rebinding); * answers any (default: none)")
	ckptKeys := fs.Int("checkpoint-keys", 0, "checkpoint once `N` distinct keys were logged (default 131072)")
	ckptEvery := checkedDurationFlag(fs, "checkpoint-interval", 0, positive, "checkpoint at least this often when anything was logged (default 10s)")
	storeURL := fs.String("store", "", "shared store `URL` (replaces --data): redis://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...] a Redis Cluster, or one standalone server; rediss://... over TLS (?ca=FILE: trust FILE's certificates); ?sentinel=NAME: the addresses are Sentinels watching master NAME")
	redisBuckets := fs.Int("redis-buckets", 0, "with a redis store: hash slots the keys are spread over, at least 4 per master; stored in the cluster by the first coordinator, and a coordinator with another value refuses to start, or, running, to write (changing it means emptying the cluster) (default 512: up to 128 masters)")
	redisWait := fs.Int("redis-wait", 0, "with a redis store: replicas that must acknowledge each write (WAIT `N`) before a batch is answered (default 0: none)")
	redisDegraded := fs.Bool("redis-wait-degraded", false, "with --redis-wait: when a master has fewer replicas than N (after a failover with one replica), accept its writes with those there are (counted, logged) instead of refusing them with 503 until a replica is back")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with the PEM certificate chain in `FILE` (with --tls-key; both read again on SIGHUP)")
	tlsKey := fs.String("tls-key", "", "the PEM private key `FILE` of --tls-cert")
	skew := checkedDurationFlag(fs, "max-clock-skew", 0, zeroOr(merge.CheckDurationOption), "how far an edge's clock may run ahead of this server's: later batch times, and windows past the current one but for the next starting within it, are refused with 400 (default 2s)")
	leaseLife := checkedDurationFlag(fs, "lease-life", 0, zeroOr(merge.CheckDurationOption), "leased limiters (auto, strict): how long an edge may admit under a lease after it asked; bounds what a dead edge strands; a sparse edge's standing unit over several windows lives at most 16 of these (default 1s)")
	leaseGrace := checkedDurationFlag(fs, "lease-grace", 0, zeroOr(merge.CheckDurationOption), "leased limiters: how long after a lease's life it stays reserved for the edge's report; above the edges' sync interval plus a round trip (default 1s)")
	strand := fs.Float64("strand-budget", 0, "leased limiters: share of a window's limit that units held ahead by sparse edges may be expected to strand; more means fewer waits and less utilisation near the limit; negative: hold nothing ahead (default 0.01)")
	isosPerKey := fs.Int("max-isolates-per-key", 0, "the most isolates a key's state remembers, `N` (1 to 65536; default 256): past it a new isolate takes the entry of the one holding the least, whose lease is counted as spent and, when that isolate reports, again; raise it for fleets with more isolates on one key (each key record grows with them)")
	maxMemory := bytesFlag(fs, "max-memory", 0, func(v int64) error { _, err := coordinator.BudgetFor(v); return err }, "the memory this server is sized for, `SIZE` in bytes or with KiB, MiB, GiB (at least 128MiB): caches and the Go memory limit (default 768MiB)")
	diskReserve := bytesFlag(fs, "disk-reserve", 0, func(v int64) error {
		if v < 0 {
			return errors.New("must not be negative (0 takes the default)")
		}
		return nil
	}, "the free space, `SIZE`, the store's writes leave on the disk of --data: below it syncs and /healthz answer 503 and the server does not start (default 64MiB)")
	tokenKeys := fs.Int("token-keys", 0, "with tokens: the most distinct keys one token's batches may name in an hour, `N`; past it its batches are refused 429 until the hour ends (default 1000000; negative: no quota)")
	tokenIsolates := fs.Int("token-isolates", 0, "with tokens: the most distinct isolate ids one token's batches may name in an hour, `N` (default 100000; negative: no quota)")
	tokenMarks := fs.Int("token-marks", 0, "with tokens, over Redis: the most distinct (isolate, bucket) pairs one token's batches may name in an hour, each a sequence mark in Redis, `N` (default 1000000; negative: no quota)")
	historyKeys := fs.Int("history-keys", 0, "keys per limiter whose per-minute history and last view the store keeps for the dashboard, `N` (default 1000; negative: the limiters' totals only)")
	lf := addLogFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("coordinator: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("coordinator: unexpected argument %q", fs.Arg(0))
	}
	if err := applyEnv(fs, flagEnv); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	if *config != "" {
		if err := applyFileSettings(fs, *config); err != nil {
			return err
		}
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	// The store's background errors log through the default logger.
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(log)
	budget, err := coordinator.BudgetFor(*maxMemory) // checked by the flag
	if err != nil {
		return err
	}
	defer gctune.Tune(budget.GoLimit)()
	// Settings that contradict each other, or that a store ignores, are
	// refused: each was taken silently (--in-memory with --data kept
	// nothing on disk; a negative --redis-wait ran without WAIT).
	switch {
	case *storeURL != "" && (*data != "" || *inMemory):
		return errors.New("coordinator: --store keeps the state in Redis: give --store, or --data, or --in-memory, not two of them")
	case *data != "" && *inMemory:
		return errors.New("coordinator: --in-memory keeps nothing on disk: give --data DIR or --in-memory, not both")
	case *redisWait < 0:
		return fmt.Errorf("coordinator: --redis-wait %d: want 0 (no WAIT) or a number of replicas", *redisWait)
	case *redisBuckets < 0:
		return fmt.Errorf("coordinator: --redis-buckets %d: want 0 (the default, %d) or a bucket count", *redisBuckets, redisstore.DefaultBuckets)
	case *isosPerKey < 0 || *isosPerKey > maxIsolatesPerKey:
		return fmt.Errorf("coordinator: --max-isolates-per-key %d: want 1 to %d (0: the default, %d)", *isosPerKey, maxIsolatesPerKey, merge.DefaultMaxIsolatesPerKey)
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return fmt.Errorf("coordinator: --listen %q: want HOST:PORT (127.0.0.1:7070, :7070): %w", *listen, err)
	}
	if *data == "" && !*inMemory && *storeURL == "" {
		return errors.New("coordinator: --data DIR is required (or EDGELIMIT_DATA), or --store redis://HOST:PORT,... for a Redis Cluster; use --in-memory for a throwaway in-memory store")
	}
	tokens, grants, err := coordinator.ParseTokens(*token)
	if err != nil {
		return err
	}
	if len(tokens)+len(grants) == 0 && !*insecure && !isLoopback(*listen) {
		return fmt.Errorf("coordinator: refusing to serve %s without a token: set --token (or EDGELIMIT_TOKEN), listen on loopback, or pass --insecure", *listen)
	}
	var cfg wire.Config
	if *config != "" {
		var err error
		if cfg, err = wire.LoadConfigFile(*config); err != nil {
			return fmt.Errorf("coordinator: %w", err)
		}
	} else {
		cfg = coordinator.DefaultConfig()
		log.Warn("coordinator: no --config given; using the built-in default: one limiter \"default\", fixed_window, 100 per 1s")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	sln, err := coordinatorTLS(ctx, ln, *tlsCert, *tlsKey, log)
	if err != nil {
		ln.Close()
		return err
	}
	ln = sln
	start := time.Now()
	opts := coordinator.Options{Dir: *data, InMemory: *inMemory, DiskReserve: *diskReserve, Config: cfg, Tokens: tokens, Grants: grants, MaxMemory: budget.MaxMemory,
		AllowedHosts: hostcheck.Parse(*allowedHosts),
		HistoryKeys:  *historyKeys, TokenKeysPerHour: *tokenKeys, TokenIsolatesPerHour: *tokenIsolates, TokenMarksPerHour: *tokenMarks,
		Merger: merge.MergerOptions{CheckpointKeys: *ckptKeys, CheckpointInterval: *ckptEvery, MaxClockSkew: *skew,
			LeaseLife: *leaseLife, LeaseGrace: *leaseGrace, StrandBudget: *strand, MaxIsolatesPerKey: *isosPerKey}, Logger: log}
	where := *data
	if *inMemory {
		where = "memory"
	}
	if *storeURL != "" {
		ro, err := redisstore.ParseURL(*storeURL)
		if err != nil {
			ln.Close()
			return fmt.Errorf("coordinator: %w", err)
		}
		redisstore.CredentialsFromEnv(&ro)
		ro.Wait, ro.Buckets, ro.WaitDegraded, ro.Logger = *redisWait, *redisBuckets, *redisDegraded, log
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		rs, err := redisstore.Open(octx, ro)
		cancel()
		if err != nil {
			ln.Close()
			return fmt.Errorf("coordinator: %w", err)
		}
		opts.Store = rs
		where = "redis " + string(rs.Mode()) + " " + strings.Join(ro.Addrs, ",")
		if ro.TLS != nil {
			where += " (TLS)"
		}
		if ro.Wait > 0 {
			where += fmt.Sprintf(", WAIT %d", ro.Wait)
			if ro.WaitDegraded {
				where += " (degraded when short)"
			}
		}
	}
	c, err := openInterruptibly(ctx, opts)
	if err != nil {
		ln.Close()
		return err
	}
	log.Info(fmt.Sprintf("coordinator: listening on %s", ln.Addr()), "addr", ln.Addr().String(), "data", where,
		"limiters", len(cfg.Limiters), "opened_in", time.Since(start).Round(time.Millisecond))
	if *config != "" {
		// The limits, as the control API changes them; the file's
		// "coordinator" settings are read at start only, but checked.
		reloadOnHUP(ctx, c, *config, log, func(data []byte) error { _, err := fileSettings(fs, *config, data); return err })
	} else {
		// (Its default action ended the process: no clean shutdown.)
		onHUP(ctx, func() {
			log.Info("coordinator: SIGHUP ignored: started without --config, there is nothing to read again")
		})
	}
	serr := c.Serve(ctx, ln)
	cerr := c.Close()
	if serr == nil && cerr == nil {
		log.Info("coordinator: shut down cleanly")
	}
	return errors.Join(serr, cerr)
}

// openInterruptibly opens the coordinator unless ctx ends first (SIGTERM
// or SIGINT): opening replays the store's log and may wait on the disk
// (a flush retried on a full disk), and a stop signal must not wait with
// it. The open left behind ends with the process.
func openInterruptibly(ctx context.Context, opts coordinator.Options) (*coordinator.Coordinator, error) {
	type opened struct {
		c   *coordinator.Coordinator
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		c, err := coordinator.Open(opts)
		ch <- opened{c, err}
	}()
	select {
	case o := <-ch:
		return o.c, o.err
	case <-ctx.Done():
		return nil, fmt.Errorf("coordinator: stopped while opening the store (%s): %w", opts.Dir, context.Cause(ctx))
	}
}

// flagEnv names the environment variable of each flag.
var flagEnv = map[string]string{
	"data": "EDGELIMIT_DATA", "listen": "EDGELIMIT_LISTEN", "config": "EDGELIMIT_CONFIG",
	"token": "EDGELIMIT_TOKEN", "in-memory": "EDGELIMIT_IN_MEMORY", "insecure": "EDGELIMIT_INSECURE", "allowed-hosts": "EDGELIMIT_ALLOWED_HOSTS",
	"checkpoint-keys": "EDGELIMIT_CHECKPOINT_KEYS", "checkpoint-interval": "EDGELIMIT_CHECKPOINT_INTERVAL",
	"max-clock-skew": "EDGELIMIT_MAX_CLOCK_SKEW", "store": "EDGELIMIT_STORE", "redis-wait": "EDGELIMIT_REDIS_WAIT", "redis-buckets": "EDGELIMIT_REDIS_BUCKETS",
	"redis-wait-degraded": "EDGELIMIT_REDIS_WAIT_DEGRADED", "lease-life": "EDGELIMIT_LEASE_LIFE", "lease-grace": "EDGELIMIT_LEASE_GRACE", "strand-budget": "EDGELIMIT_STRAND_BUDGET", "max-isolates-per-key": "EDGELIMIT_MAX_ISOLATES_PER_KEY",
	"token-keys": "EDGELIMIT_TOKEN_KEYS", "token-isolates": "EDGELIMIT_TOKEN_ISOLATES", "token-marks": "EDGELIMIT_TOKEN_MARKS",
	"tls-cert": "EDGELIMIT_TLS_CERT", "tls-key": "EDGELIMIT_TLS_KEY", "max-memory": "EDGELIMIT_MAX_MEMORY", "disk-reserve": "EDGELIMIT_DISK_RESERVE", "history-keys": "EDGELIMIT_HISTORY_KEYS",
	"log-format": "EDGELIMIT_LOG_FORMAT", "log-level": "EDGELIMIT_LOG_LEVEL",
}

// applyFileSettings sets, from the "coordinator" object of the config file
// at path, every flag given neither on the command line nor by its
// environment variable (applyEnv runs first and marks the flags it sets).
// An unknown name or a value that is no string, number or boolean is an
// error (fileSettings).
func applyFileSettings(fs *flag.FlagSet, path string) error {
	data, err := wire.ReadConfigFile(path)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	settings, err := fileSettings(fs, path, data)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if set[name] { // the command line, or the environment (applyEnv)
			continue
		}
		if err := fs.Set(name, settings[name]); err != nil {
			return fmt.Errorf("coordinator: config %s: coordinator.%s: %w", path, name, err)
		}
	}
	return nil
}

// fileSettings returns the "coordinator" object of the config file data
// (read from path, which errors name): each setting a flag of fs, its
// value as the flag's text. An unknown name is an error, and so is a value
// that is not a string, a number or a boolean: a list (["a", "b"] for
// token) was set as its JSON text, the literal token `["a"`.
func fileSettings(fs *flag.FlagSet, path string, data []byte) (map[string]string, error) {
	var file struct {
		Coordinator map[string]json.RawMessage `json:"coordinator"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("coordinator: config %s: %w", path, wire.LocateJSONError(data, -1, err))
	}
	settings := make(map[string]string, len(file.Coordinator))
	for name, raw := range file.Coordinator {
		if fs.Lookup(name) == nil || name == "config" {
			return nil, fmt.Errorf("coordinator: config %s: unknown setting %q in \"coordinator\" (use the flag names of edgelimit coordinator -h)", path, name)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("coordinator: config %s: coordinator.%s: %w", path, name, err)
		}
		switch v := v.(type) {
		case string:
			settings[name] = v
		case float64, bool:
			settings[name] = string(raw)
		default:
			return nil, fmt.Errorf("coordinator: config %s: coordinator.%s: want a string, a number or a boolean, got %s (several tokens are one string, comma-separated)", path, name, raw)
		}
	}
	return settings, nil
}

// isLoopback reports whether addr (host:port) binds only loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// maxIsolatesPerKey bounds --max-isolates-per-key: 65536 isolates, a key
// record of a few megabytes.
const maxIsolatesPerKey = 65536
