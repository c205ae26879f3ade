package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/internal/loadgen"
	"github.com/edgelimit/edgelimit/internal/rediscluster"
	"github.com/redis/go-redis/v9"
)

// System benchmarks: whole servers on loopback, started by the benchmark
// itself and measured in the same run, as throughput and p99 latency with
// the load generator on the same machine. Each group is read as ratios to
// its first row:
//
//   - "decide over HTTP": requests/s and p99 of /v1/decide against the edge
//     host (the wasm isolates decide locally, syncing in the background)
//     and against a central limiter that asks Redis on every decision
//     (INCR+EXPIRE, and GCRA in a Lua script as redis_rate does); and, as
//     the ceiling of the setup, a server answering without deciding.
//   - "ingest": acknowledged key-deltas/s into the coordinator (64 clients,
//     batches of 100 deltas over 100,000 keys) on Pebble (fsync per group
//     commit) and on a Redis Cluster of 3 masters and 3 replicas
//     (appendfsync everysec) with 1 and 2 coordinators, and with WAIT 1;
//     against them, one redis-server taking the same deltas as pipelined
//     INCRBY (100 per round trip) with appendfsync always and everysec.

// System is one whole-server measurement.
type System struct {
	Group string
	Name  string
	Unit  string // of SystemResult.PerSec
	Run   func(ctx context.Context, d time.Duration) (SystemResult, error)
}

// SystemResult is what a System measured over its duration (after a 1 s
// warm-up).
type SystemResult struct {
	PerSec float64       // operations per second, in System.Unit
	P99    time.Duration // of one request (a decision, a sync, a pipeline)
	Errors int64         // failed requests
}

const (
	ingestClients = 64
	ingestEntries = 100
	ingestKeys    = 100_000
	decideClients = 16
	decideKeys    = 1000
	warmup        = time.Second
)

// Systems lists the system benchmarks in the order `edgelimit bench`
// prints them. StopSystems stops what they started.
func Systems() []System {
	return []System{
		{"decide over HTTP", "edge host: wasm isolates, no round trip per decision", "req/s", edgeHostDecide},
		{"decide over HTTP", "central: Redis INCR+EXPIRE per decision", "req/s", centralDecide(false)},
		{"decide over HTTP", "central: Redis GCRA script per decision", "req/s", centralDecide(true)},
		{"decide over HTTP", "no limiter: the same HTTP answer, nothing decided (this setup's ceiling)", "req/s", noLimiterDecide},
		{"ingest", "coordinator on Pebble (fsync per group commit)", "key-deltas/s", pebbleIngest},
		{"ingest", "coordinator on Redis Cluster 3+3, 1 coordinator", "key-deltas/s", clusterIngest(1, 0)},
		{"ingest", "coordinator on Redis Cluster 3+3, 2 coordinators", "key-deltas/s", clusterIngest(2, 0)},
		{"ingest", "coordinator on Redis Cluster 3+3, 2 coordinators, WAIT 1", "key-deltas/s", clusterIngest(2, 1)},
		{"ingest", "Redis pipelined INCRBY, appendfsync always", "key-deltas/s", incrbyIngest("always")},
		{"ingest", "Redis pipelined INCRBY, appendfsync everysec", "key-deltas/s", incrbyIngest("everysec")},
	}
}

// serve serves h on a loopback port until the returned stop is called.
func serve(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("benchmarks: %w", err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// decideLoad sends GET /v1/decide from decideClients keep-alive clients
// over decideKeys keys for warmup + d.
func decideLoad(ctx context.Context, url string, d time.Duration) (SystemResult, error) {
	ctx, cancel := context.WithTimeout(ctx, warmup+d)
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: decideClients, MaxConnsPerHost: decideClients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	start := time.Now()
	from := start.Add(warmup)
	var n, errs atomic.Int64
	lats := make([][]time.Duration, decideClients)
	var wg sync.WaitGroup
	for c := 0; c < decideClients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 2))
			for ctx.Err() == nil {
				t0 := time.Now()
				resp, err := hc.Get(url + "/v1/decide?limiter=api&key=customer-" + strconv.Itoa(rng.IntN(decideKeys)))
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 && resp.StatusCode != 429 {
					errs.Add(1)
					continue
				}
				if t0.After(from) {
					lats[c] = append(lats[c], time.Since(t0))
					n.Add(1)
				}
			}
		}(c)
	}
	wg.Wait()
	return result(n.Load(), time.Since(from), lats, errs.Load()), nil
}

func result(n int64, elapsed time.Duration, lats [][]time.Duration, errs int64) SystemResult {
	all := slices.Concat(lats...)
	slices.Sort(all)
	r := SystemResult{PerSec: float64(n) / elapsed.Seconds(), Errors: errs}
	if len(all) > 0 {
		r.P99 = all[len(all)*99/100]
	}
	return r
}

// edgeHostDecide: the edge host (2 isolates) syncing every 100 ms with an
// in-memory coordinator.
func edgeHostDecide(ctx context.Context, d time.Duration) (SystemResult, error) {
	c, err := coordinator.Open(coordinator.Options{InMemory: true, Config: Config()})
	if err != nil {
		return SystemResult{}, err
	}
	defer c.Close()
	curl, cstop, err := serve(c.Handler())
	if err != nil {
		return SystemResult{}, err
	}
	defer cstop()
	h, err := host.New(ctx, host.Options{Config: Config(), Isolates: 2, Coordinator: curl})
	if err != nil {
		return SystemResult{}, err
	}
	defer h.Close()
	url, stop, err := serve(h.Handler())
	if err != nil {
		return SystemResult{}, err
	}
	defer stop()
	return decideLoad(ctx, url, d)
}

// centralDecide: an HTTP server answering each decision by a Redis round
// trip (redis-server on loopback, no persistence).
func centralDecide(gcra bool) func(ctx context.Context, d time.Duration) (SystemResult, error) {
	return func(ctx context.Context, d time.Duration) (SystemResult, error) {
		r, err := StartRedis(ctx, "")
		if err != nil {
			return SystemResult{}, err
		}
		defer r.Stop()
		url, stop, err := serve(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
			key := q.URL.Query().Get("key")
			var ok bool
			var err error
			if gcra {
				ok, err = RedisGCRA(q.Context(), r.Client, key, 1<<30, 1<<30, time.Second, time.Now())
			} else {
				ok, err = RedisFixedWindow(q.Context(), r.Client, key, 1<<40, time.Minute, time.Now())
			}
			w.Header().Set("Content-Type", "application/json")
			switch {
			case err != nil:
				w.WriteHeader(http.StatusInternalServerError)
			case !ok:
				w.WriteHeader(http.StatusTooManyRequests)
			}
			fmt.Fprintf(w, `{"allowed":%t}`, ok)
		}))
		if err != nil {
			return SystemResult{}, err
		}
		defer stop()
		return decideLoad(ctx, url, d)
	}
}

// noLimiterDecide: an HTTP server answering every decision "allowed"
// without deciding anything: what HTTP and the load generator alone cost.
func noLimiterDecide(ctx context.Context, d time.Duration) (SystemResult, error) {
	url, stop, err := serve(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		_ = q.URL.Query().Get("key")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"allowed":true}`)
	}))
	if err != nil {
		return SystemResult{}, err
	}
	defer stop()
	return decideLoad(ctx, url, d)
}

func ingestLoad(ctx context.Context, url string, d time.Duration) (SystemResult, error) {
	res, err := loadgen.Run(ctx, loadgen.Config{URL: url, Clients: ingestClients, Entries: ingestEntries,
		Keys: ingestKeys, Warmup: warmup, Duration: d})
	if err != nil {
		return SystemResult{}, err
	}
	return SystemResult{PerSec: res.KeyDeltasPerSec(), P99: res.P99, Errors: res.Errors}, nil
}

// pebbleIngest: the coordinator on Pebble in a temporary directory.
func pebbleIngest(ctx context.Context, d time.Duration) (SystemResult, error) {
	dir, err := os.MkdirTemp("", "edgelimit-bench-pebble-")
	if err != nil {
		return SystemResult{}, fmt.Errorf("benchmarks: %w", err)
	}
	defer os.RemoveAll(dir)
	c, err := coordinator.Open(coordinator.Options{Dir: dir, Config: coordinator.DefaultConfig()})
	if err != nil {
		return SystemResult{}, err
	}
	defer c.Close()
	url, stop, err := serve(c.Handler())
	if err != nil {
		return SystemResult{}, err
	}
	defer stop()
	return ingestLoad(ctx, url, d)
}

var (
	clusterMu sync.Mutex
	cluster   *rediscluster.Cluster
)

// sharedCluster starts (once) the Redis Cluster of the ingest rows: 3
// masters, 3 replicas, appendfsync everysec.
func sharedCluster(ctx context.Context) (*rediscluster.Cluster, error) {
	clusterMu.Lock()
	defer clusterMu.Unlock()
	if cluster != nil {
		return cluster, nil
	}
	if err := rediscluster.Available(); err != nil {
		return nil, ErrNoRedis
	}
	c, err := rediscluster.Start(ctx, rediscluster.Options{Masters: 3, ReplicasPerMaster: 1, AppendFsync: "everysec"})
	if err != nil {
		return nil, err
	}
	cluster = c
	return c, nil
}

// StopSystems stops what the system benchmarks left running (the Redis
// Cluster).
func StopSystems() {
	clusterMu.Lock()
	defer clusterMu.Unlock()
	if cluster != nil {
		cluster.Stop()
		cluster = nil
	}
}

// clusterIngest: n coordinators on the shared Redis Cluster, the clients
// spread over them, with WAIT wait.
func clusterIngest(n, wait int) func(ctx context.Context, d time.Duration) (SystemResult, error) {
	return func(ctx context.Context, d time.Duration) (SystemResult, error) {
		cl, err := sharedCluster(ctx)
		if err != nil {
			return SystemResult{}, err
		}
		if err := cl.FlushAll(ctx); err != nil {
			return SystemResult{}, err
		}
		var urls []string
		for i := 0; i < n; i++ {
			// 64 buckets, as the figures in docs/scale-out.md were measured
			// (the default, 512, is for up to 128 masters; this cluster has 3).
			rs, err := redisstore.Open(ctx, redisstore.Options{Addrs: cl.Addrs(), Wait: wait, Buckets: 64})
			if err != nil {
				return SystemResult{}, err
			}
			c, err := coordinator.Open(coordinator.Options{Store: rs, Config: coordinator.DefaultConfig()})
			if err != nil {
				rs.Close()
				return SystemResult{}, err
			}
			defer c.Close()
			url, stop, err := serve(c.Handler())
			if err != nil {
				return SystemResult{}, err
			}
			defer stop()
			urls = append(urls, url)
		}
		return ingestLoad(ctx, strings.Join(urls, ","), d)
	}
}

// incrbyIngest: one redis-server (appendonly, appendfsync fsync) taking
// the deltas as INCRBY, ingestEntries per pipeline, from ingestClients
// clients.
func incrbyIngest(fsync string) func(ctx context.Context, d time.Duration) (SystemResult, error) {
	return func(ctx context.Context, d time.Duration) (SystemResult, error) {
		r, err := StartRedis(ctx, fsync)
		if err != nil {
			return SystemResult{}, err
		}
		defer r.Stop()
		cl := redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: ingestClients})
		defer cl.Close()
		ctx, cancel := context.WithTimeout(ctx, warmup+d)
		defer cancel()
		from := time.Now().Add(warmup)
		var n, errs atomic.Int64
		lats := make([][]time.Duration, ingestClients)
		var wg sync.WaitGroup
		for c := 0; c < ingestClients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(c), 3))
				for ctx.Err() == nil {
					t0 := time.Now()
					w := strconv.FormatInt(t0.Unix(), 10)
					_, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
						for i := 0; i < ingestEntries; i++ {
							p.IncrBy(ctx, "key-"+strconv.Itoa(rng.IntN(ingestKeys))+":"+w, 1)
						}
						return nil
					})
					if err != nil {
						if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
							errs.Add(1)
						}
						continue
					}
					if t0.After(from) {
						lats[c] = append(lats[c], time.Since(t0))
						n.Add(ingestEntries)
					}
				}
			}(c)
		}
		wg.Wait()
		return result(n.Load(), time.Since(from), lats, errs.Load()), nil
	}
}
