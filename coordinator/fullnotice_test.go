package coordinator

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Full-window notices (merge/fullnotice.go) reach every isolate over HTTP,
// but only for the limiters its token's edge role is granted: a token for
// fw hears that fw/open is full, never of sw/secret (a key name and count
// of a limiter it has no business with).
func TestFullWindowNoticesFollowGrants(t *testing.T) {
	_, clk, srv := rolesServer(t)
	now := clk.now()
	W := now / sec
	fill := batch("b1", 1, now,
		wire.Delta{Limiter: "fw", Key: "open", Window: W, Delta: 100, Demand: 100},
		wire.Delta{Limiter: "sw", Key: "secret", Window: W, Delta: 100, Demand: 100})
	if st, _, p := syncAs(t, srv, "edge-b", fill); st != 200 {
		t.Fatalf("edge-b fills: %d %+v", st, p)
	}
	notices := func(rp *wire.Reply) map[string]bool {
		got := map[string]bool{}
		for _, v := range rp.Entries {
			if v.Lease == -1 && v.Exhausted {
				got[v.Limiter+"/"+v.Key] = true
			}
		}
		return got
	}
	st, rp, p := syncAs(t, srv, "edge-a", batch("a1", 1, now, wire.Delta{Limiter: "fw", Key: "x", Window: W, Delta: 1, Demand: 1}))
	if st != 200 {
		t.Fatalf("edge-a: %d %+v", st, p)
	}
	if got := notices(rp); !got["fw/open"] || got["sw/secret"] || len(got) != 1 {
		t.Fatalf("edge-a's notices %v; want fw/open only", got)
	}
	st, rp, p = syncAs(t, srv, "edge-b", batch("b2", 1, now, wire.Delta{Limiter: "fw", Key: "x", Window: W, Delta: 1, Demand: 1}))
	if st != 200 {
		t.Fatalf("edge-b: %d %+v", st, p)
	}
	if got := notices(rp); !got["fw/open"] || !got["sw/secret"] {
		t.Fatalf("edge-b's notices %v; want fw/open and sw/secret", got)
	}
}
