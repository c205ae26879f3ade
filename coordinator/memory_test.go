package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/internal/gctune"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/internal/loadgen"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// liveHeap returns the heap the last collection found live, bytes
// (runtime/metrics /gc/heap/live:bytes): no collection forced, so a
// sample does not slow what it measures.
func liveHeap() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// heapAfterGC returns the live heap in bytes after a full GC.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// floodKeys syncs keys [from, to) (each once, unique) through c as isolate
// "flood", in batches of 1000, starting at sequence number seq.
func floodKeys(tb testing.TB, c *Coordinator, from, to int, seq *int64, now int64) {
	tb.Helper()
	bt := &wire.Batch{Version: wire.Version, Isolate: "flood", At: now}
	for k := from; k < to; k += 1000 {
		*seq++
		bt.Seq = *seq
		bt.Entries = bt.Entries[:0]
		for j := k; j < min(k+1000, to); j++ {
			bt.Entries = append(bt.Entries, wire.Delta{Limiter: "default", Key: "flood-key-" + strconv.Itoa(j),
				Window: now / int64(time.Hour), Delta: 1})
		}
		if _, err := c.Sync(context.Background(), bt); err != nil {
			tb.Fatal(err)
		}
	}
}

func floodConfig() wire.Config {
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{{Name: "default",
		Algorithm: wire.FixedWindow, Limit: 100, Period: int64(time.Hour)}}}
}

// TestMemoryBoundedUnderKeyFlood: a flood of unique keys on a disk store
// with a small key cache: the heap after GC stops growing once the cache
// is full (evicted keys live only in Pebble). Without the cap, 150,000 more
// cached keys would add tens of MB.
func TestMemoryBoundedUnderKeyFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200,000 keys")
	}
	const capKeys = 16384
	// A fixed clock: the test must not straddle an hour's window boundary.
	now := time.Now().UnixNano()
	c, err := Open(Options{Dir: t.TempDir(), Config: floodConfig(), GCInterval: -1,
		Clock: clock.Func(func() int64 { return now }), Merger: merge.MergerOptions{MaxCachedKeys: capKeys}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var seq int64
	floodKeys(t, c, 0, 50_000, &seq, now)
	base := heapAfterGC()
	floodKeys(t, c, 50_000, 200_000, &seq, now)
	end := heapAfterGC()
	var cached int
	c.withMerger(func(m *merge.Merger) { cached = m.CachedKeys() })
	t.Logf("heap after GC: %.1f MiB at 50,000 keys, %.1f MiB at 200,000 keys; %d keys cached (cap %d)",
		float64(base)/(1<<20), float64(end)/(1<<20), cached, capKeys)
	if cached > capKeys+1000 {
		t.Fatalf("%d keys cached, cap %d", cached, capKeys)
	}
	if end > base+8<<20 {
		t.Fatalf("heap grew from %d to %d bytes with 150,000 more keys", base, end)
	}
	// The evicted keys are still counted (read back from Pebble).
	ks, err := c.KeyState(context.Background(), "default", "flood-key-7")
	if err != nil || ks.Count != 1 {
		t.Fatalf("flood-key-7: %+v, %v", ks, err)
	}
}

// BenchmarkKeyFlood1M: 1,000,000 unique keys through Sync (default cache
// cap, real directory, fsync per commit); reports the heap after GC as the
// flood goes (it must level off at the cache cap) and the rate.
//
//	go test -run '^$' -bench KeyFlood -benchtime 1x ./coordinator/
func BenchmarkKeyFlood1M(b *testing.B) {
	for i := 0; i < b.N; i++ {
		c, err := Open(Options{Dir: b.TempDir(), Config: floodConfig(), GCInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now().UnixNano()
		var seq int64
		start := time.Now()
		var heaps []float64
		for k := 0; k < 1_000_000; k += 250_000 {
			floodKeys(b, c, k, k+250_000, &seq, now)
			heaps = append(heaps, float64(heapAfterGC())/(1<<20))
		}
		el := time.Since(start)
		var cached int
		c.withMerger(func(m *merge.Merger) { cached = m.CachedKeys() })
		b.Logf("1,000,000 unique keys in %s; heap after GC (MiB) at 250k/500k/750k/1M keys: %.1f; %d keys cached",
			el, heaps, cached)
		b.ReportMetric(heaps[len(heaps)-1], "heap-MiB")
		b.ReportMetric(heaps[len(heaps)-1]-heaps[1], "growth-500k-1M-MiB")
		c.Close()
	}
}

// BenchmarkSteadyLoadMemory: 1000 syncs/s of 100 entries from 64 clients
// over 1,000,000 keys over HTTP for EDGELIMIT_SOAK (a Go duration, default
// 30s; the figure is 10m), sampling the heap after GC and the
// process RSS every 10% of the run: memory must not grow over a steady
// load.
//
//	EDGELIMIT_SOAK=10m go test -run '^$' -bench SteadyLoad -benchtime 1x -timeout 0 ./coordinator/
func BenchmarkSteadyLoadMemory(b *testing.B) {
	d := 30 * time.Second
	if s := os.Getenv("EDGELIMIT_SOAK"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < b.N; i++ {
		_, url := benchServer(b)
		var mu sync.Mutex
		var samples []string
		var heaps []float64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(d / 10)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				h := float64(heapAfterGC()) / (1 << 20)
				mu.Lock()
				heaps = append(heaps, h)
				samples = append(samples, fmt.Sprintf("%.1f/%.0f", h, rssMiB()))
				mu.Unlock()
			}
		}()
		res := runLoad(b, loadgen.Config{URL: url, Clients: 64, Entries: 100, Keys: 1_000_000, Rate: 1000,
			Duration: d})
		close(stop)
		<-done
		b.Logf("%s at 1000 syncs/s: heap after GC / RSS (MiB) every %s: %v", d, d/10, samples)
		if len(heaps) >= 2 {
			b.ReportMetric(heaps[len(heaps)-1]-heaps[0], "heap-growth-MiB")
			b.ReportMetric(heaps[len(heaps)-1], "heap-MiB")
		}
		b.ReportMetric(float64(res.P99.Microseconds()), "p99-µs")
	}
}

// rssMiB returns the resident set size of the process in MiB (Linux), or 0.
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res int64
	fmt.Sscan(string(b), &size, &res)
	return float64(res*int64(os.Getpagesize())) / (1 << 20)
}

// tuneAsBinary sets the garbage collector as `edgelimit coordinator
// --max-memory maxMemory` does (0: the default) until tb ends, and returns
// the budget.
func tuneAsBinary(tb testing.TB, maxMemory int64) MemoryBudget {
	tb.Helper()
	budget, err := BudgetFor(maxMemory)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(gctune.Tune(budget.GoLimit))
	return budget
}

// peakRSSMiB returns the process's peak resident set size in MiB (VmHWM,
// Linux), or 0.
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkKeyFloodHTTP: distinct keys from one edge host (4 isolates) as
// real sync batches through POST /v1/sync on loopback, against a server set
// up as the coordinator binary runs it (tuneAsBinary, caches sized by
// MaxMemory, Pebble on disk, fsync per group commit). Each isolate posts
// batches of 1000 new keys with dense sequence numbers, resending a failed
// batch as it was. At every 10% of the flood it samples the live heap (as
// of the last collection), the process RSS, and the ingest rate and the
// process's CPU per key (getrusage: less sensitive to other work on the
// machine than the rate) of the last 10%: the memory levels off once the
// key cache is full (evicted keys live only in Pebble), and the benchmark
// fails if the process's peak RSS (VmHWM, the load generator
// included) exceeds MaxMemory. EDGELIMIT_FLOOD_KEYS sets the number of keys
// (default 1,000,000), EDGELIMIT_MAX_MEMORY the server's --max-memory
// (default 768MiB). The README's figure:
//
//	EDGELIMIT_FLOOD_KEYS=3000000 EDGELIMIT_MAX_MEMORY=256MiB go test -run '^$' -bench KeyFloodHTTP -benchtime 1x -timeout 0 ./coordinator/
func BenchmarkKeyFloodHTTP(b *testing.B) {
	total := 1_000_000
	if s := os.Getenv("EDGELIMIT_FLOOD_KEYS"); s != "" {
		var err error
		if total, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	pad := "" // EDGELIMIT_FLOOD_KEY_BYTES: keys padded to this length (up to 256)
	if s := os.Getenv("EDGELIMIT_FLOOD_KEY_BYTES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 256 {
			b.Fatalf("EDGELIMIT_FLOOD_KEY_BYTES %q: want 0 to 256", s)
		}
		pad = strings.Repeat("k", max(n-len("flood-key-")-7, 0))
	}
	var maxMemory int64
	if s := os.Getenv("EDGELIMIT_MAX_MEMORY"); s != "" {
		var err error
		if maxMemory, err = ParseBytes(s); err != nil {
			b.Fatal(err)
		}
	}
	const isolates, perBatch = 4, 1000
	for i := 0; i < b.N; i++ {
		budget := tuneAsBinary(b, maxMemory)
		c, err := Open(Options{Dir: b.TempDir(), Config: floodConfig(), MaxMemory: budget.MaxMemory})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(c.Handler())
		hc := &http.Client{Timeout: 30 * time.Second}
		var next atomic.Int64 // next key index to send
		var mu sync.Mutex
		var samples []string
		var heaps, rsss, rates, cpus []float64
		step := int64(total / 10)
		start, cpuStart := time.Now(), coordtest.CPUTime(b)
		last, lastCPU := start, cpuStart
		// sample records the memory and the ingest rate of the tenth that
		// ended with keys acknowledged, without a collection (liveHeap).
		sample := func(keys int64) {
			mu.Lock()
			defer mu.Unlock()
			now, cpu := time.Now(), coordtest.CPUTime(b)
			rate, perKey := float64(step)/now.Sub(last).Seconds(), float64((cpu-lastCPU).Microseconds())/float64(step)
			last, lastCPU = now, cpu
			h, r := float64(liveHeap())/(1<<20), rssMiB()
			heaps, rsss, rates, cpus = append(heaps, h), append(rsss, r), append(rates, rate), append(cpus, perKey)
			samples = append(samples, fmt.Sprintf("%dk: %.0f/%.0f/%.0fk/%.0f", keys/1000, h, r, rate/1000, perKey))
		}
		var sampled atomic.Int64 // keys acknowledged
		var wg sync.WaitGroup
		for iso := 0; iso < isolates; iso++ {
			wg.Add(1)
			go func(iso int) {
				defer wg.Done()
				bt := &wire.Batch{Version: wire.Version, Isolate: "flood-edge-" + strconv.Itoa(iso)}
				var body []byte
				for seq := int64(1); ; seq++ {
					from := next.Add(perBatch) - perBatch
					if from >= int64(total) {
						return
					}
					now := time.Now().UnixNano()
					bt.Seq, bt.At, bt.Entries = seq, now, bt.Entries[:0]
					for k := from; k < min(from+perBatch, int64(total)); k++ {
						bt.Entries = append(bt.Entries, wire.Delta{Limiter: "default",
							Key: "flood-key-" + pad + strconv.FormatInt(k, 10), Window: now / int64(time.Hour), Delta: 1})
					}
					body = bt.AppendMsg(body[:0])
					for try := 0; ; try++ {
						resp, err := hc.Post(srv.URL+"/v1/sync", MsgpackContentType, bytes.NewReader(body))
						if err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							if resp.StatusCode == 200 {
								break
							}
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
						if try == 10 {
							b.Error(err)
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
					n := int64(len(bt.Entries))
					if done := sampled.Add(n); done/step != (done-n)/step {
						sample(done / step * step)
					}
				}
			}(iso)
		}
		wg.Wait()
		el, cpu := time.Since(start), coordtest.CPUTime(b)-cpuStart
		srv.Close()
		var cached int
		c.withMerger(func(m *merge.Merger) { cached = m.CachedKeys() })
		ks, err := c.KeyState(context.Background(), "default", "flood-key-"+pad+"7")
		if err != nil || ks.Count != 1 {
			b.Fatalf("flood-key-7 after the flood: %+v, %v", ks, err)
		}
		c.Close()
		peak := peakRSSMiB()
		b.Logf("%d distinct keys over HTTP in %s (%.0f keys/s), --max-memory %d MiB (Go limit %d MiB, %d keys cached at most, block cache %d MiB); live heap / RSS (MiB) / ingest of the last tenth (keys/s) / CPU per key of the last tenth (µs, server and load generator) by keys acknowledged: %v; %d keys cached; peak RSS %.0f MiB; %.1f µs of CPU per key",
			total, el.Round(time.Millisecond), float64(total)/el.Seconds(), budget.MaxMemory>>20, budget.GoLimit>>20,
			budget.Merger.MaxCachedKeys, budget.BlockCache>>20, samples, cached, peak, float64(cpu.Microseconds())/float64(total))
		if n := len(heaps); n >= 4 {
			b.ReportMetric(heaps[n-1], "heap-MiB")
			b.ReportMetric(rsss[n-1], "rss-MiB")
			b.ReportMetric(heaps[n-1]-heaps[n/2-1], "heap-growth-2nd-half-MiB")
			b.ReportMetric(rsss[n-1]-rsss[n/2-1], "rss-growth-2nd-half-MiB")
			b.ReportMetric(rates[0], "keys/s-first-tenth")
			b.ReportMetric(slices.Min(rates[n/2:]), "keys/s-2nd-half-min")
			b.ReportMetric(cpus[0], "cpu-µs/key-first-tenth")
			b.ReportMetric(slices.Max(cpus[n/2:]), "cpu-µs/key-2nd-half-max")
		}
		b.ReportMetric(peak, "rss-peak-MiB")
		if peak > float64(budget.MaxMemory>>20) {
			b.Errorf("peak RSS %.0f MiB above --max-memory %d MiB", peak, budget.MaxMemory>>20)
		}
	}
}

// TestBudgetFor: the default budget is merge's defaults and the 768 MiB Go
// limit less the block cache; a smaller bound scales every cache; too small
// a bound is refused.
func TestBudgetFor(t *testing.T) {
	d, err := BudgetFor(0)
	if err != nil {
		t.Fatal(err)
	}
	if d.MaxMemory != DefaultMaxMemory || d.BlockCache != 64<<20 || d.GoLimit != (768-64-128)<<20 ||
		d.Merger.MaxCachedKeys != merge.DefaultMaxCachedKeys || d.Merger.MaxIsolateEntries != merge.DefaultMaxIsolateEntries ||
		d.Merger.MaxCachedIsolates != merge.DefaultMaxCachedIsolates || d.Merger.CheckpointBytes != merge.DefaultCheckpointBytes {
		t.Fatalf("default budget %+v", d)
	}
	s, err := BudgetFor(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if s.Merger.MaxCachedKeys != 87381 || s.BlockCache != (256<<20)/12 || s.GoLimit+s.BlockCache+32<<20+(256<<20)/8 != 256<<20 {
		t.Fatalf("256 MiB budget %+v", s)
	}
	if _, err := BudgetFor(MinMaxMemory - 1); err == nil || !strings.Contains(err.Error(), "at least 128 MiB") {
		t.Fatalf("below the minimum: %v", err)
	}
	if _, err := BudgetFor(-1); err == nil {
		t.Fatal("negative bound accepted")
	}
	big, err := BudgetFor(1 << 50)
	if err != nil {
		t.Fatal(err)
	}
	m := big.Merger
	m.EnsureDefaults()
	if err := m.Validate(); err != nil || m.MaxIsolateEntries <= 0 {
		t.Fatalf("1 PiB: %+v %v", m, err)
	}
}

// TestMaxMemorySizesTheCaches: Options.MaxMemory sizes the cache bounds
// left zero, keeps those set, and Validate refuses a bound too small.
func TestMaxMemorySizesTheCaches(t *testing.T) {
	o := Options{InMemory: true, Config: testConfig(), MaxMemory: 256 << 20, Merger: merge.MergerOptions{MaxCachedIsolates: 5}}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Merger.MaxCachedKeys != 87381 || o.Merger.MaxIsolateEntries != 4*87381 || o.Merger.MaxCachedIsolates != 5 ||
		o.Merger.CheckpointKeys != 87381/2 || o.Merger.CheckpointBytes != (256<<20)/12 {
		t.Fatalf("sized: %+v", o.Merger)
	}
	o = Options{InMemory: true, Config: testConfig(), MaxMemory: 1 << 20}
	o.EnsureDefaults()
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "MaxMemory") {
		t.Fatalf("1 MiB: %v", err)
	}
	if _, err := Open(o); err == nil {
		t.Fatal("Open accepted a 1 MiB bound")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1234": 1234, "768MiB": 768 << 20, "1 GiB": 1 << 30, "2TiB": 2 << 40,
		"64KiB": 64 << 10, "10B": 10} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "1.5GiB", "-1", "1MB", "1 M", "9999999TiB", "0x10"} {
		if got, err := ParseBytes(in); err == nil || !strings.HasPrefix(err.Error(), "coordinator: ") {
			t.Errorf("ParseBytes(%q) = %d, %v; want an error", in, got, err)
		}
	}
}

// FuzzParseBytes: any input gives a size >= 0 or an error, never a panic;
// a size read back from its decimal form is the same.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"768MiB", "1GiB", "12", "8796093022208TiB", " 5 KiB", "B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("%q: %d", s, n)
		}
		if m, err := ParseBytes(strconv.FormatInt(n, 10)); err != nil || m != n {
			t.Fatalf("%q: %d, read back %d, %v", s, n, m, err)
		}
	})
}
