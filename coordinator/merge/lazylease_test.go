package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A strict key of a long window rides along lazily: the isolate reports it
// when its lease is half spent, at its next tick, so its demand per batch
// is over half its lease. Twice that demand grew the lease at every batch;
// held by an isolate that dies, all of it strands for the rest of the
// window. A lease that lasted until its batch no longer grows (need), and
// the isolate still never runs dry at a steady pace.
func TestLazyLeaseDoesNotRatchet(t *testing.T) {
	const hour = 3600 * sec
	c, clk := newTestCoordinator(t, 1000*hour, func(o *testOptions) {
		o.Config = wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
			{Name: "hour", Algorithm: wire.FixedWindow, Limit: 100000, Period: hour, Mode: wire.Strict},
		}}
	})
	const tick, perTick = sec / 10, 3 // 30 requests/s, a sync interval of 100 ms
	var seq, lease, grant, admitted, refused, most, dry int64
	for i := 0; i < 600; i++ { // 60 s
		now := clk.add(tick)
		for r := 0; r < perTick; r++ {
			if lease > 0 {
				lease--
				admitted++
			} else {
				refused++
			}
		}
		if i >= 100 {
			dry += refused
		}
		// The module's rule for a strict fixed-window key (wasm/core
		// urgent): report when refused, or when a lease of 2 units or
		// more is half spent.
		if refused == 0 && !(grant >= 2 && lease*2 < grant) {
			continue
		}
		seq++
		rp := mustSync(t, c, batch("a", seq, now, wire.Delta{Limiter: "hour", Key: "k", Window: now / hour, Delta: admitted, Demand: admitted + refused}))
		v := viewOf(t, rp, "hour", "k")
		lease, grant, admitted, refused = v.Lease, v.Lease, 0, 0
		if i >= 100 {
			most = max(most, v.Lease)
		}
	}
	t.Logf("after the first 10 s: leases up to %d units at %d units per tick, %d refused", most, perTick, dry)
	if most > 4*perTick {
		t.Fatalf("lease up to %d units after the first 10 s at %d units per 100 ms tick, want at most %d: it grows though it lasts", most, perTick, 4*perTick)
	}
	if dry > 0 {
		t.Fatalf("%d requests refused at a steady pace after the first 10 s, want 0", dry)
	}
}
