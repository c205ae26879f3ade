package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Amendments over Redis Cluster (merge/shared_amend.go): the asks of an
// amendment are served in the bucket of their key, and a grant to an
// applied batch is written (version-checked) before it is told.

// openShared opens a coordinator over s (a store of the package's
// cluster) on clk.
func openShared(t *testing.T, s merge.Store, clk *fakeClock) *Coordinator {
	t.Helper()
	c, err := Open(Options{Store: s, Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// windowStart returns a clock standing at the start of a window (of the
// test limiters' 1 s), and that window.
func windowStart() (*fakeClock, int64) {
	clk := &fakeClock{}
	clk.set((t0/sec + 1) * sec)
	return clk, clk.now() / sec
}

// TestRedisAmendmentGrantsLease: a batch applied by one coordinator, then
// its amendment sent to the other: the lease of a key of the batch is
// raised to the ask as far as the window has budget free, and keys only
// the amendment names (spread over buckets the batch does not touch) get
// theirs; both coordinators read the leases back. Resent, the amendment
// grants nothing more.
func TestRedisAmendmentGrantsLease(t *testing.T) {
	rs := openTestRedis(t, redisstore.Options{})
	clk, w := windowStart()
	a, b := openShared(t, rs, clk), openShared(t, openRedisNoFlush(t), clk)
	// Isolate b fills the window but for 5 units (sfw: 100/s).
	mustSync(t, a, batch("b", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 95, Demand: 95}))
	b1 := batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 1})
	first := viewOf(t, mustSync(t, a, b1), "sfw", "k").Lease
	if first < 1 {
		t.Fatalf("lease %d, want >= 1", first)
	}
	clk.add(sec / 100)
	asks := []wire.Ask{{Limiter: "sfw", Key: "k", Window: w, Cost: first + 2}}
	var others []string
	for i := range 8 { // more keys than the 3 masters: several buckets the batch does not touch
		others = append(others, fmt.Sprintf("other%d", i))
		asks = append(asks, wire.Ask{Limiter: "sfw", Key: others[i], Window: w, Cost: 3})
	}
	// An approximate key's ask is ignored (no view, nothing written).
	asks = append(asks, wire.Ask{Limiter: "fw", Key: "k", Window: w, Cost: 7})
	am := coordtest.Amend(b1, asks...)
	rp := mustSync(t, b, am)
	free := 100 - 95 - first - getKey(t, a, "sfw", "k").Leases["b"]
	want := first + min(2, free)
	if got := viewOf(t, rp, "sfw", "k").Lease; got != want {
		t.Fatalf("lease of k after the amendment: %d, want %d (%d before, %d free)", got, want, first, free)
	}
	if len(rp.Entries) != 1+len(others) || rp.Entries[0].Key != "k" {
		t.Fatalf("reply views %+v: want k then the %d other keys", rp.Entries, len(others))
	}
	for i, k := range others {
		if v := rp.Entries[1+i]; v.Key != k || v.Lease != 3 {
			t.Fatalf("view %d: %s lease %d, want %s lease 3 (in the order of the asks)", 1+i, v.Key, v.Lease, k)
		}
	}
	buckets := map[int]bool{}
	for _, k := range append([]string{"k"}, others...) {
		buckets[rs.Bucket([]byte(merge.KeyStorageKey("sfw", k)))] = true
		for _, c := range []*Coordinator{a, b} {
			ks := getKey(t, c, "sfw", k)
			if ks.Count+ks.LeaseSum > 100 {
				t.Fatalf("%s: count %d + leases %d > 100", k, ks.Count, ks.LeaseSum)
			}
			if l, wantL := ks.Leases["a"], map[bool]int64{true: want, false: 3}[k == "k"]; l != wantL {
				t.Fatalf("%s: reserved for a %d, want %d", k, l, wantL)
			}
		}
	}
	if len(buckets) < 2 {
		t.Fatalf("the asked keys fell in %d bucket(s): the test needs asks-only buckets", len(buckets))
	}
	if st := b.mergeStats(); st.Amendments != 1 || st.AsksGranted != want-first+3*int64(len(others)) || st.Duplicates != 1 {
		t.Fatalf("stats of b: %d amendments, %d granted, %d duplicates", st.Amendments, st.AsksGranted, st.Duplicates)
	}
	// Resent (to either coordinator): the same leases, nothing more
	// granted (the records are written again, to confirm what the
	// replies tell).
	for _, c := range []*Coordinator{a, b} {
		rp := mustSync(t, c, am)
		if got := viewOf(t, rp, "sfw", "k").Lease; got != want {
			t.Fatalf("lease of k after the amendment was resent: %d, want %d", got, want)
		}
		if got := viewOf(t, rp, "sfw", "other3").Lease; got != 3 {
			t.Fatalf("lease of other3 after the amendment was resent: %d, want 3", got)
		}
	}
	if g := a.mergeStats().AsksGranted + b.mergeStats().AsksGranted; g != want-first+3*int64(len(others)) {
		t.Fatalf("granted %d in all after the resends", g)
	}
	// An ask for more than is left gets what is left, no more (an ask of
	// a unit past it: held requests of cost 1 are served in part; one of
	// a large cost would be granted nothing, merge's oneRequest).
	rp = mustSync(t, a, coordtest.Amend(b1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: first + free + 1}))
	if got := viewOf(t, rp, "sfw", "k").Lease; got != first+free {
		t.Fatalf("lease of k when the window has %d free: %d, want %d", free, got, first+free)
	}
	if ks := getKey(t, b, "sfw", "k"); ks.Count+ks.LeaseSum != 100 {
		t.Fatalf("k: count %d + leases %d, want the whole limit 100 reserved", ks.Count, ks.LeaseSum)
	}
}

// TestRedisAmendmentBeforeItsBatch: an amendment that reaches one
// coordinator before its batch is applied as the batch (its asks served
// after it); the batch, reaching the other, is a retry: counted once.
func TestRedisAmendmentBeforeItsBatch(t *testing.T) {
	rs := openTestRedis(t, redisstore.Options{})
	clk, w := windowStart()
	a, b := openShared(t, rs, clk), openShared(t, openRedisNoFlush(t), clk)
	b1 := batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 1, Demand: 1})
	rp := mustSync(t, a, coordtest.Amend(b1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: 2}, wire.Ask{Limiter: "sfw", Key: "solo", Window: w, Cost: 4}))
	v := viewOf(t, rp, "sfw", "k")
	if v.Count != 1 || v.Lease < 2 {
		t.Fatalf("count %d, lease %d; want 1 and >= 2", v.Count, v.Lease)
	}
	if l := viewOf(t, rp, "sfw", "solo").Lease; l != 4 {
		t.Fatalf("lease of a key only the amendment names: %d, want 4", l)
	}
	rp = mustSync(t, b, b1)
	if v2 := viewOf(t, rp, "sfw", "k"); v2.Count != 1 || v2.Lease != v.Lease {
		t.Fatalf("the batch after its amendment: count %d, lease %d; want 1 and %d", v2.Count, v2.Lease, v.Lease)
	}
	if ks := getKey(t, b, "sfw", "solo"); ks.Leases["a"] != 4 {
		t.Fatalf("solo: reserved for a %d, want 4", ks.Leases["a"])
	}
}

// failingWrites is a Redis store whose conditional writes fail (nothing
// written) while fail is set.
type failingWrites struct {
	*redisstore.Store
	mu   sync.Mutex
	fail bool
}

func (f *failingWrites) WriteShared(ctx context.Context, subs []merge.SubWrite) ([]merge.SubOutcome, error) {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if !fail {
		return f.Store.WriteShared(ctx, subs)
	}
	outs := make([]merge.SubOutcome, len(subs))
	for i := range outs {
		outs[i] = merge.SubFailed
	}
	return outs, errors.New("injected: master unreachable")
}

// TestRedisAmendmentGrantUnwrittenNotTold: when the write of an applied
// batch's grant fails, the amendment gets an error, not the lease, and
// nothing is reserved; sent again once the store writes, it is granted.
func TestRedisAmendmentGrantUnwrittenNotTold(t *testing.T) {
	rs := openTestRedis(t, redisstore.Options{})
	clk, w := windowStart()
	fw := &failingWrites{Store: openRedisNoFlush(t)}
	a, b := openShared(t, rs, clk), openShared(t, fw, clk)
	b1 := batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 1, Demand: 1})
	first := viewOf(t, mustSync(t, a, b1), "sfw", "k").Lease
	am := coordtest.Amend(b1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: first + 10})
	fw.mu.Lock()
	fw.fail = true
	fw.mu.Unlock()
	if rp, err := b.Sync(context.Background(), am); err == nil {
		t.Fatalf("amendment answered (lease %d) though its grant was not written", viewOf(t, rp, "sfw", "k").Lease)
	}
	if ks := getKey(t, a, "sfw", "k"); ks.Leases["a"] != first {
		t.Fatalf("reserved for a after the failed write: %d, want %d", ks.Leases["a"], first)
	}
	fw.mu.Lock()
	fw.fail = false
	fw.mu.Unlock()
	if l := viewOf(t, mustSync(t, b, am), "sfw", "k").Lease; l != first+10 {
		t.Fatalf("lease once written: %d, want %d", l, first+10)
	}
	if ks := getKey(t, a, "sfw", "k"); ks.Leases["a"] != first+10 {
		t.Fatalf("reserved for a: %d, want %d", ks.Leases["a"], first+10)
	}
}

// TestRedisAmendmentsTwoCoordinatorsExact: isolates send batches and
// amendments for one strict key (100/s) to two coordinators at random,
// amendments before their batch, after it and resent; each admits only
// within the largest lease its replies told. The window never holds more
// than its limit, counted plus reserved, read back from either coordinator,
// and every admitted unit is counted once.
func TestRedisAmendmentsTwoCoordinatorsExact(t *testing.T) {
	clk, w := windowStart()
	openTestRedis(t, redisstore.Options{}).Close() // flush
	cs := []*Coordinator{openShared(t, openRedisNoFlush(t), clk), openShared(t, openRedisNoFlush(t), clk)}
	const isolates, rounds = 8, 30
	var mu sync.Mutex
	var admitted int64
	var wg sync.WaitGroup
	for i := range isolates {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 18))
			iso := fmt.Sprintf("iso%d", i)
			lease := int64(0)
			for seq := int64(1); seq <= rounds; seq++ {
				use := min(lease, 3) // admitted since the last cut, within the lease
				b := batch(iso, seq, clk.now(), wire.Delta{Limiter: "sfw", Key: "hot", Window: w, Delta: use, Demand: use + 1})
				am := coordtest.Amend(b, wire.Ask{Limiter: "sfw", Key: "hot", Window: w, Cost: 4}, wire.Ask{Limiter: "sfw", Key: "cold", Window: w, Cost: 2})
				var sends []*wire.Batch
				switch rng.IntN(3) {
				case 0:
					sends = []*wire.Batch{b, am}
				case 1:
					sends = []*wire.Batch{am, b} // the amendment overtook its batch
				default:
					sends = []*wire.Batch{b, am, am} // resent
				}
				lease = 0
				for _, s := range sends {
					rp, err := cs[rng.IntN(2)].Sync(context.Background(), s)
					if err != nil {
						t.Errorf("%s seq %d: %v", iso, seq, err)
						return
					}
					// Every reply's lease is from the batch's cut on.
					lease = max(lease, viewOf(t, rp, "sfw", "hot").Lease)
				}
				mu.Lock()
				admitted += use
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if admitted > 100 || admitted == 0 {
		t.Fatalf("admitted %d, want 1 to 100", admitted)
	}
	for _, c := range cs {
		for _, k := range []string{"hot", "cold"} {
			ks := getKey(t, c, "sfw", k)
			if ks.Count+ks.LeaseSum > 100 {
				t.Fatalf("%s: count %d + leases %d > limit 100", k, ks.Count, ks.LeaseSum)
			}
			if k == "hot" && ks.Count != admitted {
				t.Fatalf("hot counted %d, admitted %d", ks.Count, admitted)
			}
		}
	}
	var granted, amendments int64
	for _, c := range cs {
		st := c.mergeStats()
		granted, amendments = granted+st.AsksGranted, amendments+st.Amendments
	}
	if amendments == 0 || granted == 0 {
		t.Fatalf("%d amendments, %d units granted: the asks were not served", amendments, granted)
	}
	t.Logf("admitted %d, %d amendments, %d units granted to asks", admitted, amendments, granted)
}
