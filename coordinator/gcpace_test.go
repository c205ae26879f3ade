package coordinator

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// gcAsk is one wait the GC loop asked for.
type gcAsk struct {
	ns   int64
	fire chan struct{}
}

// gcDriver runs a coordinator's GC loop (gcRun) with pacer p on fake
// time: each wait the loop asks for is handed to the test, which lets it
// pass at once and adds it to elapsed. Between two steps the loop is
// blocked on its wait, so the test may read p and the store.
type gcDriver struct {
	p          *gcPacer
	asked      chan gcAsk
	stop, done chan struct{}
	pending    gcAsk
	elapsed    time.Duration // the fake time waited so far
	steps      int
}

func startGC(t *testing.T, c *Coordinator, p *gcPacer) *gcDriver {
	t.Helper()
	d := &gcDriver{p: p, asked: make(chan gcAsk), stop: make(chan struct{}), done: make(chan struct{})}
	after := func(ns int64) <-chan struct{} {
		ch := make(chan struct{}, 1)
		d.asked <- gcAsk{ns, ch}
		return ch
	}
	go func() {
		defer close(d.done)
		c.gcRun(p, after, d.stop)
	}()
	d.pending = <-d.asked
	t.Cleanup(func() { close(d.stop); <-d.done })
	return d
}

// step lets the pending wait pass, so that the loop runs one GC step, and
// returns the wait it asks for after it.
func (d *gcDriver) step() time.Duration {
	d.elapsed += time.Duration(d.pending.ns)
	d.pending.fire <- struct{}{}
	d.pending = <-d.asked
	d.steps++
	return time.Duration(d.pending.ns)
}

// floodFW syncs n unique keys of limiter fw at t0 as isolate "flood" (one
// stored record each once checkpointed) and checkpoints.
func floodFW(t *testing.T, c *Coordinator, n int) {
	t.Helper()
	bt := &wire.Batch{Version: wire.Version, Isolate: "flood", At: t0}
	for k := 0; k < n; k += 1000 {
		bt.Seq++
		bt.Entries = bt.Entries[:0]
		for j := k; j < min(k+1000, n); j++ {
			bt.Entries = append(bt.Entries, wire.Delta{Limiter: "fw", Key: "flood-" + strconv.Itoa(j), Window: t0 / sec, Delta: 1})
		}
		if _, err := c.Sync(context.Background(), bt); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// storedKeys counts the key records in c's store.
func storedKeys(c *Coordinator) int {
	n := 0
	c.withMerger(func(*merge.Merger) {
		c.store.Scan([]byte{merge.PrefixKey}, nil, func(k, v []byte) bool { n++; return true })
	})
	return n
}

// openGCStore opens a coordinator on Pebble in a temporary directory at
// virtual time t0, without its own GC loop, caching few keys (cached keys
// are live to GC).
func openGCStore(t *testing.T) (*Coordinator, *fakeClock) {
	t.Helper()
	clk := &fakeClock{}
	clk.set(t0)
	c, err := Open(Options{Dir: t.TempDir(), Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1,
		Merger: merge.MergerOptions{MaxCachedKeys: 16}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, clk
}

// TestGCKeepsPaceWithAKeyFlood: 200,000 keys of a flood expire in a store
// whose GC visits 2,000 records every 2 s when idle (1,000 records a
// second: a pass over them takes 100 intervals, 200 s). With the pace
// following the store's size while GC finds garbage, they are all deleted
// within 20 intervals of the loop's (fake) time (about GCPass, 30 s), and
// the pace falls back to the idle one once the garbage is gone. Before,
// the steps came every interval whatever they found: 200,000 records
// waited up to 200 s, and a flood of 6 million keys 10 minutes.
func TestGCKeepsPaceWithAKeyFlood(t *testing.T) {
	const n, budget = 200_000, 2000
	interval := DefaultGCInterval
	c, clk := openGCStore(t)
	floodFW(t, c, n)
	d := startGC(t, c, newGCPacer(interval, budget, DefaultGCPass))
	// A first pass over the live keys counts the records, at the idle pace.
	for d.p.last.visited == 0 {
		if w := d.step(); w != interval {
			t.Fatalf("step %d over live keys: next in %v, want the idle %v", d.steps, w, interval)
		}
		if d.steps > n/budget+10 {
			t.Fatalf("no pass over %d keys in %d steps of %d", n, d.steps, budget)
		}
	}
	if d.p.last.visited < n || d.p.last.deleted != 0 {
		t.Fatalf("first pass %+v, want %d records visited and none deleted", d.p.last, n)
	}
	// The windows end; the isolate is silent for 10 s. The keys still
	// cached are live to GC.
	var cached int
	c.withMerger(func(m *merge.Merger) { cached = m.CachedKeys() })
	want := int64(n - cached)
	clk.set(t0 + 10*sec)
	start, steps := d.elapsed, d.steps
	for c.mergeStats().GCDeleted < want && d.elapsed-start <= 100*interval {
		d.step()
	}
	took := d.elapsed - start
	t.Logf("%d expired keys deleted in %v of GC time (%d steps, %d intervals; the idle pace needs %v)",
		want, took, d.steps-steps, int(took/interval), time.Duration(n/budget)*interval)
	if del := c.mergeStats().GCDeleted; del != want || took > 20*interval {
		t.Fatalf("%d of %d expired keys deleted after %v (%d intervals) of GC; want all within 20 intervals", del, want, took, int(took/interval))
	}
	if left := storedKeys(c); left != cached {
		t.Fatalf("%d key records left, want the %d cached", left, cached)
	}
	// Nothing left to collect: back to the idle pace within a pass or two
	// (the store now holds the isolate's high-water mark only).
	w := time.Duration(0)
	for range 6 {
		w = d.step()
	}
	for range 10 {
		if w != interval {
			t.Fatalf("after the garbage: next step in %v, want the idle %v", w, interval)
		}
		w = d.step()
	}
}

// TestGCIdleStoreKeepsTheIdlePace: a store with nothing to collect (50,000
// live keys; then none) is stepped every GCInterval, each step visiting
// at most GCBudget records: no faster than a fixed interval, however
// large the store.
func TestGCIdleStoreKeepsTheIdlePace(t *testing.T) {
	const n, budget = 50_000, 2000
	interval := DefaultGCInterval
	c, _ := openGCStore(t)
	d := startGC(t, c, newGCPacer(interval, budget, DefaultGCPass))
	for range 5 { // empty
		if w := d.step(); w != interval {
			t.Fatalf("empty store: next step in %v, want %v", w, interval)
		}
	}
	floodFW(t, c, n)
	passes := 0
	for d.steps < 3*n/budget { // three passes
		before := d.p.last
		w := d.step()
		if w != interval {
			t.Fatalf("step %d over live keys: next in %v, want %v", d.steps, w, interval)
		}
		if d.p.last != before {
			passes++
		}
	}
	if passes < 2 || d.p.last.visited < n || d.p.last.deleted != 0 {
		t.Fatalf("%d passes, the last %+v; want 2 or more over %d records, nothing deleted", passes, d.p.last, n)
	}
	if del := c.mergeStats().GCDeleted; del != 0 {
		t.Fatalf("GC deleted %d live records", del)
	}
}

// TestGCPacerCaps: the pacer's arithmetic on made-up steps. Idle steps
// keep the interval and the budget; steps that find garbage come as often
// as a pass over the last pass's records in GCPass takes, never less often
// than the idle pace, never taking over a quarter of the committer's time,
// and each visits about gcStepTime's worth of records; a negative GCPass
// keeps the idle pace.
func TestGCPacerCaps(t *testing.T) {
	const interval, budget, pass = 2 * time.Second, 20_000, 30 * time.Second
	ms := time.Millisecond
	// A pass over 6,000,000 live records: idle.
	p := newGCPacer(interval, budget, pass)
	for i := range 300 {
		w, b := p.next(merge.GCResult{Visited: budget, PassDone: i == 299}, 5*ms)
		if w != interval || b != budget {
			t.Fatalf("idle step %d: %v, %d", i, w, b)
		}
	}
	if p.last.visited != 6_000_000 {
		t.Fatalf("pass counted %d records", p.last.visited)
	}
	// Garbage: 6,000,000 records in 30 s, 200,000 a second; a step of
	// 20,000 records that took 5 ms asks for 100 ms, 4,000 records
	// per 1 ms...
	w, b := p.next(merge.GCResult{Visited: budget, Deleted: 1000}, 5*ms)
	if w != 100*ms || b != budget {
		t.Fatalf("garbage in a large store: next in %v with %d records, want 100ms with %d", w, b, budget)
	}
	// ...a step that took 40 ms (2 µs a record) waits 120 ms (a quarter
	// of the time) and the next visits 2,500 records (5 ms).
	w, b = p.next(merge.GCResult{Visited: budget, Deleted: budget}, 40*ms)
	if w != 120*ms || b != 2500 {
		t.Fatalf("slow step: next in %v with %d records, want 120ms with 2500", w, b)
	}
	// ...and never fewer than gcMinStep records.
	_, b = p.next(merge.GCResult{Visited: 2500, Deleted: 2500}, 100*ms)
	if b != gcMinStep {
		t.Fatalf("very slow step: next with %d records, want %d", b, gcMinStep)
	}
	// A store of 400,000 records: a pass in 30 s is 13,333 records a
	// second, a step of 20,000 every 1.5 s...
	p = newGCPacer(interval, budget, pass)
	for i := range 20 {
		p.next(merge.GCResult{Visited: budget, PassDone: i == 19}, ms)
	}
	if w, _ = p.next(merge.GCResult{Visited: budget, Deleted: budget}, ms); w != 1500*ms {
		t.Fatalf("400,000 records with garbage: next in %v, want 1.5s", w)
	}
	// ...one of 200,000, 6,667 a second: the idle pace is the slowest.
	p = newGCPacer(interval, budget, pass)
	for i := range 10 {
		p.next(merge.GCResult{Visited: budget, PassDone: i == 9}, ms)
	}
	if w, _ = p.next(merge.GCResult{Visited: budget, Deleted: budget}, ms); w != interval {
		t.Fatalf("200,000 records with garbage: next in %v, want %v", w, interval)
	}
	// ...and never slower than the idle pace: 100,000 records at 1 µs a
	// record, steps of 5,000 records every 0.5 s.
	p = newGCPacer(interval, budget, pass)
	for i := range 5 {
		p.next(merge.GCResult{Visited: budget, PassDone: i == 4}, 20*ms)
	}
	if w, b = p.next(merge.GCResult{Visited: budget, Deleted: budget}, 20*ms); w != interval || b != 5000 {
		t.Fatalf("100,000 records with garbage: next in %v with %d records, want %v with 5000", w, b, interval)
	}
	if w, b = p.next(merge.GCResult{Visited: 5000, Deleted: 5000}, 5*ms); w != 500*ms || b != 5000 {
		t.Fatalf("100,000 records with garbage, steps of 5,000: next in %v with %d records, want 500ms with 5000", w, b)
	}
	// A small store with garbage in every pass (each pass a step) is not
	// stepped more often than an idle one.
	p = newGCPacer(interval, budget, pass)
	p.next(merge.GCResult{Visited: 10, PassDone: true}, ms/100)
	for range 5 {
		if w, _ = p.next(merge.GCResult{Visited: 10, Deleted: 1, PassDone: true}, ms/100); w != interval {
			t.Fatalf("small store with garbage: next in %v, want %v", w, interval)
		}
	}
	// Under 1% of the visited records deleted: idle.
	p = newGCPacer(interval, budget, pass)
	p.next(merge.GCResult{Visited: budget, PassDone: true}, ms)
	if w, _ = p.next(merge.GCResult{Visited: budget, Deleted: 199}, ms); w != interval {
		t.Fatalf("0.995%% garbage: next in %v, want %v", w, interval)
	}
	// GCPass negative: the idle pace whatever GC finds.
	p = newGCPacer(interval, budget, -1)
	for range 3 {
		if w, b = p.next(merge.GCResult{Visited: budget, Deleted: budget}, ms); w != interval || b != budget {
			t.Fatalf("GCPass < 0: next in %v with %d records", w, b)
		}
	}
}

// BenchmarkGCKeyFlood: 1,000,000 keys of a 1 s limiter synced as fast as
// one client can (Pebble on disk, real time, the GC loop on its defaults),
// then left to expire; reports how long after the flood GC took to delete
// them, and the slowest of the syncs of one key every 10 ms meanwhile.
// GCPASS=-1 runs the fixed pace (GCBudget every GCInterval).
//
//	go test -run '^$' -bench GCKeyFlood -benchtime 1x ./coordinator/
func BenchmarkGCKeyFlood(b *testing.B) {
	const n = 1_000_000
	pass := time.Duration(0)
	if v, err := strconv.Atoi(os.Getenv("GCPASS")); err == nil {
		pass = time.Duration(v) * time.Second
	}
	for range b.N {
		c, err := Open(Options{Dir: b.TempDir(), Config: testConfig(), GCPass: pass,
			Merger: merge.MergerOptions{MaxCachedKeys: 1024}})
		if err != nil {
			b.Fatal(err)
		}
		bt := &wire.Batch{Version: wire.Version, Isolate: "flood"}
		start := time.Now()
		for k := 0; k < n; k += 1000 {
			now := time.Now().UnixNano()
			bt.Seq++
			bt.At = now
			bt.Entries = bt.Entries[:0]
			for j := k; j < k+1000; j++ {
				bt.Entries = append(bt.Entries, wire.Delta{Limiter: "fw", Key: "flood-" + strconv.Itoa(j), Window: now / sec, Delta: 1})
			}
			if _, err := c.Sync(context.Background(), bt); err != nil {
				b.Fatal(err)
			}
		}
		flood := time.Since(start)
		end := time.Now()
		var lat []time.Duration
		probe := &wire.Batch{Version: wire.Version, Isolate: "probe"}
		for c.mergeStats().GCDeleted < n-2000 && time.Since(end) < 5*time.Minute {
			now := time.Now()
			probe.Seq++
			probe.At = now.UnixNano()
			probe.Entries = []wire.Delta{{Limiter: "fw", Key: "probe", Window: probe.At / sec, Delta: 1}}
			if _, err := c.Sync(context.Background(), probe); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(now))
			time.Sleep(10 * time.Millisecond)
		}
		gone := time.Since(end)
		slices.Sort(lat)
		b.Logf("GCPass %v: %d keys synced in %v; GC had deleted %d records %v after the flood (they expire 2-3 s after their last sync); probe syncs p50 %v, p99 %v, max %v",
			c.opts.GCPass, n, flood.Round(time.Millisecond), c.mergeStats().GCDeleted, gone.Round(100*time.Millisecond),
			lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
		c.Close()
	}
}
