package coordinator

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/loadgen"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

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
		Clock: func() int64 { return now }, Merger: MergerOptions{MaxCachedKeys: capKeys}})
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
	c.withMerger(func(m *Merger) { cached = m.CachedKeys() })
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
		c.withMerger(func(m *Merger) { cached = m.CachedKeys() })
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
