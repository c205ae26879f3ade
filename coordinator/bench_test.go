package coordinator

import (
	"bufio"
	"context"
	"fmt"
	"github.com/cockroachdb/pebble/v2/vfs"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"
	"github.com/edgelimit/edgelimit/internal/loadgen"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Benchmarks (figures, not assertions). Run with:
//
//	go test -run '^$' -bench 'HTTP|Restart' -benchtime 1x ./coordinator/
//
// Each serves a coordinator on a real directory (fsync on every group
// commit) over loopback HTTP, with the load generator on the same machine.

func benchServer(b *testing.B) (*Coordinator, string) {
	b.Helper()
	if os.Getenv("EDGELIMIT_BENCH_NOGCTUNE") == "" {
		tuneAsBinary(b, 0) // as the coordinator binary does
	}
	c, err := Open(Options{InMemory: os.Getenv("BENCH_MEM") != "", Dir: b.TempDir(), Config: DefaultConfig()})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Serve(ctx, ln); close(done) }()
	b.Cleanup(func() { cancel(); <-done; c.Close() })
	return c, "http://" + ln.Addr().String()
}

func runLoad(b *testing.B, cfg loadgen.Config) loadgen.Result {
	b.Helper()
	res, err := loadgen.Run(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Log(res)
	b.Log(commitStats(cfg.URL))
	if res.Syncs == 0 {
		b.Fatal("no sync acknowledged")
	}
	return res
}

// BenchmarkHTTPThroughput64Clients: 64 clients, batches of 100 entries over
// 100,000 keys, as fast as possible; 2s warm-up (first touch of each key
// reads Pebble), then 5s measured: durably committed key-deltas per second.
func BenchmarkHTTPThroughput64Clients(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_, url := benchServer(b)
		res := runLoad(b, loadgen.Config{URL: url, Clients: 64, Entries: 100, Warmup: 2 * time.Second, Duration: 5 * time.Second})
		b.ReportMetric(res.KeyDeltasPerSec(), "keydeltas/s")
		b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
	}
}

// BenchmarkHTTPLatencyAt1000SyncsPerSec: 1000 syncs/s of 100 entries from
// 64 clients; 2s warm-up, then 5s measured: sync latency percentiles.
func BenchmarkHTTPLatencyAt1000SyncsPerSec(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_, url := benchServer(b)
		res := runLoad(b, loadgen.Config{URL: url, Clients: 64, Entries: 100, Rate: 1000, Warmup: 2 * time.Second, Duration: 5 * time.Second})
		b.ReportMetric(res.SyncsPerSec(), "syncs/s")
		b.ReportMetric(float64(res.P50.Microseconds()), "p50-µs")
		b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
	}
}

// BenchmarkRestart1MKeys: store 1,000,000 keys, close, and measure the time
// from Open to the first Sync answered (ready to serve).
func BenchmarkRestart1MKeys(b *testing.B) {
	const keys = 1_000_000
	dir := b.TempDir()
	cfg := floodConfig()
	now := time.Now().UnixNano()
	c, err := Open(Options{Dir: dir, Config: cfg, Merger: merge.MergerOptions{MaxCachedKeys: 1 << 16}})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	seq := int64(0)
	for k := 0; k < keys; k += wire.MaxBatchEntries {
		seq++
		bt := &wire.Batch{Version: wire.Version, Isolate: "filler", Seq: seq, At: now}
		for j := k; j < min(k+wire.MaxBatchEntries, keys); j++ {
			bt.Entries = append(bt.Entries, wire.Delta{Limiter: "default", Key: fmt.Sprintf("key-%07d", j),
				Window: now / int64(time.Hour), Delta: 1})
		}
		if _, err := c.Sync(context.Background(), bt); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("stored %d keys in %s", keys, time.Since(start))
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
	benchReady(b, dir, cfg, now, 1)
}

// benchReady measures, b.N times, the time from opening the coordinator
// on dir to the first reply, and checks that key-0000042 of limiter
// "default" counts want.
func benchReady(b *testing.B, dir string, cfg wire.Config, now, want int64) {
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c, err := Open(Options{Dir: dir, Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		rp, err := c.Sync(context.Background(), &wire.Batch{Version: wire.Version, Isolate: "probe", Seq: int64(i + 1),
			At: now, Entries: []wire.Delta{{Limiter: "default", Key: "key-0000042", Window: now / int64(time.Hour)}}})
		if err != nil {
			b.Fatal(err)
		}
		ready := time.Since(t0)
		if rp.Entries[0].Count != want {
			b.Fatalf("key-0000042 count %d after restart, want %d", rp.Entries[0].Count, want)
		}
		b.ReportMetric(float64(ready.Milliseconds()), "ms-to-ready")
		b.Logf("ready in %s (replayed %d log records)", ready, c.m.Stats().Replayed)
		b.StopTimer()
		c.Close()
		b.StartTimer()
	}
}

// commitStats summarizes the commit metrics of the server at url (whole run,
// warm-up included): group commits, mean requests per group, mean commit time.
func commitStats(url string) string {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	v := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && strings.HasPrefix(f[0], "edgelimit_coordinator_") {
			x, _ := strconv.ParseFloat(f[1], 64)
			v[strings.TrimPrefix(f[0], "edgelimit_coordinator_")] = x
		}
	}
	n := v["commit_seconds_count"]
	if n == 0 {
		return "no commits"
	}
	slow := 100 * (n - v[`commit_seconds_bucket{le="0.0032"}`]) / n
	return fmt.Sprintf("%.0f group commits, %.1f requests/group, commit (WAL write+fsync+memtable) mean %.2f ms, "+
		"%.1f%% over 3.2 ms; %.0f checkpoints, mean %.0f ms",
		n, v["group_requests_sum"]/v["group_requests_count"], 1000*v["commit_seconds_sum"]/n, slow,
		v["checkpoints_total"], 1000*v["checkpoint_seconds_sum"]/max(v["checkpoint_seconds_count"], 1))
}

// BenchmarkRestartAfterCrash1MKeys: 1,000,000 keys stored, then as much log
// as the default thresholds let pile up before a checkpoint (131,071
// distinct keys logged, no checkpoint), then a crash (the store is closed
// without a checkpoint): the time from opening the store to the first
// reply, log replay included.
func BenchmarkRestartAfterCrash1MKeys(b *testing.B) {
	const keys = 1_000_000
	dir := b.TempDir()
	cfg := floodConfig()
	now := time.Now().UnixNano()
	w := now / int64(time.Hour)
	s, err := pebblestore.Open(vfs.Default, dir)
	if err != nil {
		b.Fatal(err)
	}
	m, err := merge.NewMerger(cfg, s, merge.MergerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	seq := int64(0)
	fill := func(from, to int) {
		for k := from; k < to; k += wire.MaxBatchEntries {
			seq++
			bt := &wire.Batch{Version: wire.Version, Isolate: "filler", Seq: seq, At: now}
			for j := k; j < min(k+wire.MaxBatchEntries, to); j++ {
				bt.Entries = append(bt.Entries, wire.Delta{Limiter: "default", Key: fmt.Sprintf("key-%07d", j), Window: w, Delta: 1})
			}
			if _, err := m.Apply(bt, now); err != nil {
				b.Fatal(err)
			}
			rd := m.Ready(now, to != keys) // checkpoint (when due) in the first fill only
			if err := s.Commit(rd.Ops); err != nil {
				b.Fatal(err)
			}
			m.Advance(merge.Done{Gen: rd.Gen})
			if ck := rd.Checkpoint; ck != nil {
				ops, _ := ck.Ops()
				if err := s.Commit(ops); err != nil {
					b.Fatal(err)
				}
				m.Advance(merge.Done{Checkpoint: ck})
			}
		}
	}
	fill(0, keys)                          // stored, checkpointed as the coordinator does
	fill(0, merge.DefaultCheckpointKeys-1) // logged only: what a crash leaves to replay
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	benchReady(b, dir, cfg, now, 2)
}

// BenchmarkHTTPFloor64Clients is the throughput benchmark against a server
// that does only what any coordinator must around the merge: read the
// body, decode and validate the batch, encode a reply with one view per
// entry, over the same loopback HTTP from the same 64 clients. No merge,
// no store: the ceiling this machine's HTTP stack and load generator allow.
func BenchmarkHTTPFloor64Clients(b *testing.B) {
	for i := 0; i < b.N; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(io.LimitReader(r.Body, DefaultMaxBodyBytes))
			var bt wire.Batch
			if err == nil {
				err = bt.UnmarshalMsg(body)
			}
			if err == nil {
				err = bt.Validate()
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rp := wire.Reply{Version: wire.Version, Seq: bt.Seq, At: bt.At, Entries: make([]wire.View, len(bt.Entries))}
			for j, e := range bt.Entries {
				rp.Entries[j] = wire.View{Limiter: e.Limiter, Key: e.Key, Window: e.Window, Count: e.Delta, Lease: -1, Isolates: 1}
			}
			w.Header().Set("Content-Type", "application/msgpack")
			w.Write(rp.AppendMsg(nil))
		})}
		go srv.Serve(ln)
		res, err := loadgen.Run(context.Background(), loadgen.Config{URL: "http://" + ln.Addr().String(), Clients: 64, Entries: 100,
			Warmup: 2 * time.Second, Duration: 5 * time.Second})
		srv.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.Log(res)
		b.ReportMetric(res.KeyDeltasPerSec(), "keydeltas/s")
	}
}
