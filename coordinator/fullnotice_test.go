package coordinator

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Full-window notices (merge/fullnotice.go) reach every isolate over HTTP,
// but only for the limiters its token's edge role is granted, and only to
// tokens that may read (list keys): a reader granted fw hears that fw/open
// is full, never of sw/secret (a key name and count of a limiter it has no
// business with); an edge-only token hears of neither (they are other
// clients' keys); a token of Options.Tokens hears of both once its
// isolate named both limiters.
func TestFullWindowNoticesFollowGrants(t *testing.T) {
	_, clk, srv := newTestServer(t, func(o *Options) {
		o.Tokens = []string{"fleet"}
		o.Grants = []Grant{
			{Token: "read-fw", Roles: RoleEdge | RoleRead, Limiters: []string{"fw"}},
			{Token: "edge-only", Roles: RoleEdge},
			{Token: "admin", Roles: RoleAdmin},
		}
	})
	now := clk.now()
	W := now / sec
	fill := batch("f1", 1, now,
		wire.Delta{Limiter: "fw", Key: "open", Window: W, Delta: 100, Demand: 100},
		wire.Delta{Limiter: "sw", Key: "secret", Window: W, Delta: 100, Demand: 100})
	if st, _, p := syncAs(t, srv, "fleet", fill); st != 200 {
		t.Fatalf("fleet fills: %d %+v", st, p)
	}
	notices := func(token string, b *wire.Batch) map[string]bool {
		t.Helper()
		st, rp, p := syncAs(t, srv, token, b)
		if st != 200 {
			t.Fatalf("%s: %d %+v", token, st, p)
		}
		got := map[string]bool{}
		for i := range rp.Entries {
			if rp.Entries[i].Notice() {
				got[rp.Entries[i].Limiter+"/"+rp.Entries[i].Key] = true
			}
		}
		return got
	}
	fw := wire.Delta{Limiter: "fw", Key: "x", Window: W, Delta: 1, Demand: 1}
	sw := wire.Delta{Limiter: "sw", Key: "x", Window: W, Delta: 1, Demand: 1}
	if got := notices("read-fw", batch("r1", 1, now, fw)); !got["fw/open"] || len(got) != 1 {
		t.Fatalf("read-fw's notices %v; want fw/open only", got)
	}
	if got := notices("edge-only", batch("e1", 1, now, fw, sw)); len(got) != 0 {
		t.Fatalf("edge-only's notices %v; want none", got)
	}
	if got := notices("fleet", batch("f2", 1, now, fw, sw)); !got["fw/open"] || !got["sw/secret"] {
		t.Fatalf("fleet's notices %v; want fw/open and sw/secret", got)
	}
	// A pause names in each reply the keys of its batch, never the keys
	// of notices: an edge-only token learnt the names of other clients'
	// full keys from the upstream views of a paused limiter.
	for _, lim := range []string{"fw", "sw"} {
		if st, body := postJSON(t, srv, "/v1/limiters/"+lim+"/pause", "admin", `{"for": "10m", "reason": "test"}`); st != 200 {
			t.Fatalf("admin pauses %s: %d %s", lim, st, body)
		}
	}
	for _, token := range []string{"edge-only", "read-fw", "fleet"} {
		st, rp, p := syncAs(t, srv, token, batch(token+"-p", 1, now, fw))
		if st != 200 {
			t.Fatalf("%s: %d %+v", token, st, p)
		}
		for _, u := range rp.Upstream {
			if u.Key != "x" {
				t.Errorf("%s was told the upstream view of %s/%s, a key its batch did not name", token, u.Limiter, u.Key)
			}
		}
		if len(rp.Upstream) != 1 || rp.Upstream[0].Pause <= 0 {
			t.Errorf("%s: upstream views %+v, want fw/x paused", token, rp.Upstream)
		}
	}
}
