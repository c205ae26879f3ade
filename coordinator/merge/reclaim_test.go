package merge

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestReclaimAdmitsNoMore: 12 isolates share strict keys (a fixed window
// and a token bucket, 50 per second) that keep 4 isolates each, so new
// isolates keep taking entries whose leases are charged and given up
// (reclaim.go). Each isolate admits only within the lease its last reply
// told it, for the lease's life, and goes on doing so after its entry was
// taken. What the isolates admit in a window never passes the limit, nor
// in the bucket its tokens, and leases are reclaimed.
func TestReclaimAdmitsNoMore(t *testing.T) {
	const P, limit = int64(1e9), int64(50)
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "w", Algorithm: wire.FixedWindow, Limit: limit, Period: P, Mode: wire.Strict},
		{Name: "b", Algorithm: wire.TokenBucket, Limit: limit, Period: P, Burst: limit, Mode: wire.Strict}}}
	for seed := uint64(1); seed <= 4; seed++ {
		m, err := NewMerger(cfg, newMemStore(), MergerOptions{MaxIsolatesPerKey: 4})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 0))
		type iso struct {
			seq          int64
			lease, win   int64 // what it may admit in window win
			until        int64 // end of the lease's life
			blease, bEnd int64 // bucket lease and its life's end
		}
		isos := make([]iso, 12)
		admitted := map[int64]int64{} // window: cost admitted
		var bucketAdmits []int64      // times of bucket admissions, one per unit
		now := int64(1000e9)
		for range 4000 {
			now += rng.Int64N(20e6)
			i := rng.IntN(len(isos))
			is := &isos[i]
			w := now / P
			var a, ba int64
			if is.win == w && now < is.until && is.lease > 0 {
				a = rng.Int64N(is.lease + 1)
				is.lease -= a
				admitted[w] += a
			}
			if now < is.bEnd && is.blease > 0 {
				ba = is.blease // all of it: the bucket runs dry
				is.blease -= ba
				for range ba {
					bucketAdmits = append(bucketAdmits, now)
				}
			}
			is.seq++
			b := &wire.Batch{Version: wire.Version, Isolate: fmt.Sprintf("i%d", i), Seq: is.seq, At: now, Entries: []wire.Delta{
				{Limiter: "w", Key: "k", Window: w, Delta: a, Demand: a + rng.Int64N(8)},
				{Limiter: "b", Key: "k", Delta: ba, Demand: ba + rng.Int64N(8)}}}
			rp, err := m.Apply(b, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Commit(now); err != nil {
				t.Fatal(err)
			}
			if v := viewOf(t, rp, "w", "k"); v.Window == w && v.Life > 0 && v.Lease >= 0 {
				is.lease, is.win, is.until = v.Lease, w, now+v.Life
			} else if v.Life < 0 {
				is.lease = 0
			}
			if v := viewOf(t, rp, "b", "k"); v.Life > 0 && v.Lease >= 0 {
				is.blease, is.bEnd = v.Lease, now+v.Life
			} else if v.Life < 0 {
				is.blease = 0
			}
		}
		for w, n := range admitted {
			if n > limit {
				t.Fatalf("seed %d: window %d admitted %d, over the limit %d", seed, w, n, limit)
			}
		}
		// The bucket (50, refilled at 50/s, full at the start) never owes:
		// replaying the admissions on a bucket leaves it at 0 or more
		// tokens (one unit of rounding).
		tokens, last := float64(limit), int64(0)
		for _, at := range bucketAdmits {
			if last > 0 {
				tokens = min(float64(limit), tokens+float64(at-last)*float64(limit)/float64(P))
			}
			last = at
			if tokens--; tokens < -1 {
				t.Fatalf("seed %d: the bucket owes %.1f units at %d: admitted past its tokens", seed, -tokens, at)
			}
		}
		if m.Stats().LeasesReclaimed == 0 {
			t.Fatalf("seed %d: no lease reclaimed: the test does not exercise reclaim", seed)
		}
		t.Logf("seed %d: %d leases reclaimed, %d windows", seed, m.Stats().LeasesReclaimed, len(admitted))
	}
}
