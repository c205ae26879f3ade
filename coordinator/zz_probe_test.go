package coordinator

import (
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

func TestZZProbe(t *testing.T) {
	for _, lim := range []string{"sfw", "ssw"} {
		for _, amend := range []bool{false, true} {
			c, clk, srv := newTestServer(t, func(o *Options) { o.Tokens = []string{"a", "b"} })
			now := clk.now()
			w := now / sec
			b1 := batch("x", 1, now, wire.Delta{Limiter: lim, Key: "k", Window: w, Delta: 1, Demand: 1})
			if amend {
				b1 = coordtest.Amend(b1, wire.Ask{Limiter: lim, Key: "k", Window: 1 << 40, Cost: 100})
			}
			st, rp, p := syncAs(t, srv, "a", b1)
			t.Logf("%s amend=%v attacker: %d %+v %+v", lim, amend, st, rp, p)
			if !amend {
				st, rp, p = syncAs(t, srv, "a", coordtest.Amend(b1, wire.Ask{Limiter: lim, Key: "k", Window: 1 << 40, Cost: 100}))
				t.Logf("  amendment: %d %+v %+v", st, rp, p)
			}
			ks := getKey(t, c, lim, "k")
			t.Logf("  key: %+v", ks)
			st, rp, p = syncAs(t, srv, "b", batch("y", 1, now, wire.Delta{Limiter: lim, Key: "k", Window: w, Delta: 1, Demand: 10}))
			t.Logf("  honest: %d %+v %+v", st, rp, p)
			clk.add(sec)
			st, rp, p = syncAs(t, srv, "b", batch("y", 2, clk.now(), wire.Delta{Limiter: lim, Key: "k", Window: w + 1, Delta: 1, Demand: 10}))
			t.Logf("  honest next window: %d %+v %+v", st, rp, p)
		}
	}
}
