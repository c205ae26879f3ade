package coordinator

import (
	"context"
	"github.com/edgelimit/edgelimit/clock"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestStrictNeverOverrunsWithDelayedReplies drives real limiter cores (the
// code the wasm module runs) in strict mode against the coordinator, with
// replies delivered late (isolates keep admitting under their old lease
// while a reply is in flight) and demand moving between isolates (so leases
// shrink): no window ever admits more than the limit.
func TestStrictNeverOverrunsWithDelayedReplies(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { strictDelayedReplies(t, seed) })
	}
}

// strictDelayedReplies drives 4 isolates of the core against the
// coordinator with replies delivered late (across window boundaries, so
// standing leases of the next window and stale replies meet) and checks
// that no window admits more than the limit.
func strictDelayedReplies(t *testing.T, seed uint64) {
	const limit, n = 100, 4
	var now int64 = 1e12
	var clk atomic.Int64 // what the coordinator's goroutines read
	clk.Store(now)
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: limit, Period: 1e9, Mode: wire.Strict}}}
	c, err := Open(Options{InMemory: true, Config: cfg, Clock: clock.Func(clk.Load), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	isos := make([]*core.Core, n)
	inflight := make([][]byte, n) // reply bytes not yet delivered
	for i := range isos {
		cc := cfg
		cc.IsolateID = "iso-" + strconv.Itoa(i)
		if isos[i], err = core.New(cc); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 4))
	admitted := map[int64]int64{}
	var r core.Result
	total := int64(0)
	for step := 0; step < 40000; step++ {
		now += rng.Int64N(2e6)
		clk.Store(now)
		i := rng.IntN(n)
		// Demand moves: isolate (step/5000)%n is hot.
		if rng.IntN(3) > 0 {
			i = (step / 5000) % n
		}
		switch rng.IntN(10) {
		case 0: // cut a batch and send it; the reply waits
			if inflight[i] != nil {
				continue
			}
			out, err := isos[i].SyncOut(now, nil)
			if err != nil || len(out) == 0 {
				continue
			}
			var b wire.Batch
			if err := b.UnmarshalMsg(out); err != nil {
				t.Fatal(err)
			}
			rp, err := c.Sync(context.Background(), &b)
			if err != nil {
				t.Fatal(err)
			}
			inflight[i] = rp.AppendMsg(nil)
		case 1: // a late reply arrives
			if inflight[i] != nil {
				if err := isos[i].SyncIn(inflight[i], now); err != nil {
					t.Fatal(err)
				}
				inflight[i] = nil
			}
		default:
			if err := isos[i].Decide(0, []byte("k"), 1, now, &r); err != nil {
				t.Fatal(err)
			}
			if r.Allowed {
				admitted[now/1e9]++
				total++
			}
		}
	}
	for w, a := range admitted {
		if a > limit {
			t.Errorf("window %d admitted %d > limit %d", w, a, limit)
		}
	}
	if total < 10*limit {
		t.Fatalf("only %d admitted in %d windows: the test does not exercise leases", total, len(admitted))
	}
	t.Logf("%d admitted over %d windows", total, len(admitted))
}
