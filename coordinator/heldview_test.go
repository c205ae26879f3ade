package coordinator

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The view's Held counts what other isolates admitted under live leases
// and have not reported yet (a strict fixed window reports lazily): the
// units their last grant gave for the requests they held, and what their
// pace says they used since. Isolate a holds 7 requests of a 10/minute
// key and is granted them; b's peek then reads Held 7 (remaining 3, as
// the module subtracts it), not 0 (remaining 10). With a's unused units
// ahead, Held stays what a probably admitted, not all it holds. Run on a
// Redis Cluster too (TestMergeOnRedisCluster), where every batch is merged
// on the records read afresh: what a's grant was for (isoState.owed) was
// not in the record there, and b read count 0 + held 0, remaining 10
// where 3 were left.
func TestHeldCountsLiveLeasesSpent(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, func(o *Options) {
		o.Config = wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
			{Name: "m10", Algorithm: wire.FixedWindow, Limit: 10, Period: 60 * sec, Mode: wire.Strict}}}
	})
	clk.set((t0/(60*sec)+1)*60*sec + sec)
	w := clk.now() / (60 * sec)
	va := viewOf(t, mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w, Demand: 7})), "m10", "k")
	if va.Lease < 7 {
		t.Fatalf("a granted %d, want its 7 held requests", va.Lease)
	}
	clk.add(sec / 10)
	vb := viewOf(t, mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w})), "m10", "k")
	if vb.Count+vb.Held != 7 {
		t.Fatalf("b's view: count %d + held %d, want the 7 a admitted under its lease (a holds %d)", vb.Count, vb.Held, va.Lease)
	}
	// a reports them: counted, no longer held.
	clk.add(sec / 10)
	mustSync(t, c, batch("a", 2, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w, Delta: 7, Demand: 7}))
	vb = viewOf(t, mustSync(t, c, batch("b", 2, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w})), "m10", "k")
	if vb.Count != 7 || vb.Held > 1 {
		t.Fatalf("after a's report: count %d, held %d; want 7 and at most a unit a may hold ahead", vb.Count, vb.Held)
	}
}
