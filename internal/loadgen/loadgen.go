// Package loadgen drives a coordinator over HTTP the way edge hosts do:
// Clients concurrent isolates, each posting batches of Entries key-deltas to
// POST /v1/sync, and measures durably committed key-deltas per second and
// the sync latency distribution.
package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Config describes a load. Zero fields take the defaults.
type Config struct {
	URL      string        // coordinator base URL, e.g. http://127.0.0.1:7070 (required); several comma-separated: client c uses the (c mod n)th
	Token    string        // bearer token, if the coordinator requires one
	Clients  int           // concurrent clients (isolates); default 64
	Entries  int           // key-deltas per batch; default 100
	Keys     int           // distinct keys drawn from; default 100000
	Limiter  string        // limiter name; default "default"
	Period   int64         // the limiter's period in ns, for window indexes; default 1s
	Rate     float64       // total syncs per second across clients; 0 = as fast as possible
	Duration time.Duration // how long to measure; default 5s
	Warmup   time.Duration // load applied before measuring (not counted); default 0
	// Acked, when set, is called (from client c's goroutine) each time a
	// batch of client c is acknowledged, with the time of the reply: a
	// failover test's timeline. Default: none.
	Acked func(c int, at time.Time)
}

// Result is what a run measured.
type Result struct {
	Syncs     int64         // batches acknowledged (200)
	KeyDeltas int64         // entries in acknowledged batches
	Errors    int64         // failed requests
	Elapsed   time.Duration // wall time of the run
	P50, P99  time.Duration // sync latency percentiles
	Max       time.Duration
}

// KeyDeltasPerSec returns the durably committed key-deltas per second.
func (r Result) KeyDeltasPerSec() float64 { return float64(r.KeyDeltas) / r.Elapsed.Seconds() }

// SyncsPerSec returns the acknowledged syncs per second.
func (r Result) SyncsPerSec() float64 { return float64(r.Syncs) / r.Elapsed.Seconds() }

// String formats r on one line.
func (r Result) String() string {
	return fmt.Sprintf("%d syncs (%.0f/s), %.0f key-deltas/s, p50 %s, p99 %s, max %s, %d errors",
		r.Syncs, r.SyncsPerSec(), r.KeyDeltasPerSec(), r.P50, r.P99, r.Max, r.Errors)
}

// Run applies the load until cfg.Duration passes or ctx ends.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.URL == "" {
		return Result{}, errors.New("loadgen: no URL")
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 64
	}
	if cfg.Entries <= 0 {
		cfg.Entries = 100
	}
	if cfg.Keys <= 0 {
		cfg.Keys = 100000
	}
	if cfg.Limiter == "" {
		cfg.Limiter = "default"
	}
	if cfg.Period <= 0 {
		cfg.Period = int64(time.Second)
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Warmup+cfg.Duration)
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Clients, MaxConnsPerHost: cfg.Clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	urls := strings.Split(cfg.URL, ",")
	keys := make([]string, cfg.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}
	var syncs, deltas, errs atomic.Int64
	lats := make([][]time.Duration, cfg.Clients)
	run := fmt.Sprintf("%x", rand.Uint64()) // fresh isolate ids per run
	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	var wg sync.WaitGroup
	for c := 0; c < cfg.Clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			var interval time.Duration
			if cfg.Rate > 0 {
				interval = time.Duration(float64(time.Second) * float64(cfg.Clients) / cfg.Rate)
			}
			next := start.Add(time.Duration(rng.Int64N(int64(max(interval, 1)))))
			url := urls[c%len(urls)]
			b := wire.Batch{Version: wire.Version, Isolate: fmt.Sprintf("lg-%s-%d", run, c), Seq: 1,
				Entries: make([]wire.Delta, cfg.Entries)}
			var body []byte
			// As an isolate does: a failed batch is resent as it was (same
			// seq, same bytes) until acknowledged; only then is the next
			// one cut. A 409 (sequence refused, nothing applied) starts a
			// new incarnation: a new id, the same batch as its seq 1.
			incarnation, fresh := 0, true
			for ctx.Err() == nil {
				if interval > 0 {
					if d := time.Until(next); d > 0 {
						select {
						case <-time.After(d):
						case <-ctx.Done():
							return
						}
					}
					next = next.Add(interval)
				}
				if fresh {
					now := time.Now().UnixNano()
					b.At = now
					for i := range b.Entries {
						b.Entries[i] = wire.Delta{Limiter: cfg.Limiter, Key: keys[rng.IntN(len(keys))],
							Window: now / cfg.Period, Delta: 1, Demand: 1}
					}
					body = b.AppendMsg(body[:0])
					fresh = false
				}
				req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/sync", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/msgpack")
				if cfg.Token != "" {
					req.Header.Set("Authorization", "Bearer "+cfg.Token)
				}
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusConflict {
					incarnation++
					b.Isolate, b.Seq = fmt.Sprintf("lg-%s-%d~%d", run, c, incarnation), 1
					body = b.AppendMsg(body[:0])
				}
				if resp.StatusCode != 200 {
					errs.Add(1)
					continue
				}
				b.Seq++
				fresh = true
				if cfg.Acked != nil {
					cfg.Acked(c, time.Now())
				}
				if t0.Before(measureFrom) {
					continue
				}
				lats[c] = append(lats[c], time.Since(t0))
				syncs.Add(1)
				deltas.Add(int64(cfg.Entries))
			}
		}(c)
	}
	wg.Wait()
	res := Result{Syncs: syncs.Load(), KeyDeltas: deltas.Load(), Errors: errs.Load(), Elapsed: time.Since(measureFrom)}
	all := slices.Concat(lats...)
	slices.Sort(all)
	if n := len(all); n > 0 {
		res.P50, res.P99, res.Max = all[n/2], all[n*99/100], all[n-1]
	}
	return res, nil
}
