package coordinator

import (
	"fmt"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestLeasesCannotFillAKey: a client (token evil) syncs a strict key of
// 1000/h from 256 isolate ids, asking for 1 unit each: every entry the
// coordinator keeps per key (MergerOptions.MaxIsolatesPerKey, 256) then
// holds a live lease. Another client's isolate (token edge) must still get
// a lease for what it asks while the window has budget free (it got 0 for
// the rest of the hour, with 744 units free), on a window and on a token
// bucket; what an evicted lease held stays charged, so the key never
// grants past its limit.
func TestLeasesCannotFillAKey(t *testing.T) {
	const hour = 3600 * sec
	c, clk, srv := newTestServer(t, func(o *Options) {
		o.Tokens = []string{"edge", "evil"}
		o.Config = wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
			{Name: "w", Algorithm: wire.FixedWindow, Limit: 1000, Period: hour, Mode: wire.Strict},
			{Name: "b", Algorithm: wire.TokenBucket, Limit: 1000, Period: hour, Mode: wire.Strict}}}
	})
	w := clk.now() / hour
	entry := func(lim string, demand int64) wire.Delta {
		d := wire.Delta{Limiter: lim, Key: "k", Demand: demand}
		if lim == "w" {
			d.Window = w
		}
		return d
	}
	for _, lim := range []string{"w", "b"} {
		base := clk.now()
		for i := range 256 {
			st, rp, p := syncAs(t, srv, "evil", batch(fmt.Sprintf("%s-%d", lim, i), 1, base, entry(lim, 1)))
			if st != 200 || viewOf(t, rp, lim, "k").Lease != 1 {
				t.Fatalf("%s: evil isolate %d: %d %+v %+v, want a lease of 1", lim, i, st, rp, p)
			}
		}
		for i, at := range []int64{0, 60 * sec} {
			clk.set(base + at)
			st, rp, p := syncAs(t, srv, "edge", batch(fmt.Sprintf("honest-%s-%d", lim, i), 1, clk.now(), entry(lim, 10)))
			if v := viewOf(t, rp, lim, "k"); st != 200 || v.Lease < 10 {
				t.Fatalf("%s: an honest isolate %d s after 256 leases of 1: %d %+v %+v, want a lease of 10", lim, at/sec, st, v, p)
			}
			ks := getKey(t, c, lim, "k")
			if used := ks.Count + ks.LeaseSum; lim == "w" && (used > 1000 || used < 256+10*int64(i+1)) {
				t.Fatalf("%s: count %d + leases %d, want every lease granted still counted or reserved, within 1000", lim, ks.Count, ks.LeaseSum)
			}
		}
	}
}
