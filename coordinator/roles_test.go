package coordinator

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// rolesServer: edge-a may sync fw and sfw only; edge-b may sync every
// limiter and read; reader may read; admin may reset; fleet (a token
// without roles) may do everything.
func rolesServer(t *testing.T) (*Coordinator, *fakeClock, *httptest.Server) {
	return newTestServer(t, func(o *Options) {
		o.Tokens = []string{"fleet"}
		o.Grants = []Grant{
			{Token: "edge-a", Roles: RoleEdge, Limiters: []string{"fw", "sfw"}},
			{Token: "edge-b", Roles: RoleEdge | RoleRead},
			{Token: "reader", Roles: RoleRead},
			{Token: "admin", Roles: RoleAdmin},
		}
	})
}

// call sends method path with token (no body) and returns the status and
// body.
func call(t *testing.T, srv *httptest.Server, method, path, token string) (int, []byte) {
	t.Helper()
	return controlDo(t, srv, method, path, "", token)
}

// wantForbidden checks a 403 problem naming what is missing.
func wantForbidden(t *testing.T, what string, st int, body []byte, missing string) {
	t.Helper()
	if st != 403 {
		t.Fatalf("%s: status %d (%s), want 403", what, st, body)
	}
	p := decodeProblem(t, body)
	if p.Type != "urn:edgelimit:problem:forbidden" || p.Status != 403 || !strings.Contains(p.Detail, missing) {
		t.Fatalf("%s: problem %+v, want forbidden naming %q", what, p, missing)
	}
}

// TestTokenRoles: over real HTTP, each route needs its role (edge: sync,
// counted for its granted limiters only, upstream signals included; read:
// the dashboard's API and a key's state; admin: reset) and every refusal
// is a 403 problem naming the role missing; a token without roles may do
// everything; an unknown token is 401. A batch's items of limiters the
// token is not granted are not counted and the reply names them
// (Edgelimit-Uncounted); the rest of the batch is (uncounted.go).
func TestTokenRoles(t *testing.T) {
	c, clk, srv := rolesServer(t)
	now := clk.now()
	if st, _, p := syncAs(t, srv, "edge-a", batch("a1", 1, now, fwDelta("k", 5))); st != 200 {
		t.Fatalf("edge-a syncs fw: %d %+v", st, p)
	}
	st, uncounted, rp := syncUncounted(t, srv, "edge-a", batch("a1", 2, now, fwDelta("k", 1), wire.Delta{Limiter: "sw", Key: "k", Window: now / sec, Delta: 1}))
	if st != 200 || uncounted != "sw" || len(rp.Entries) != 1 || rp.Entries[0].Limiter != "fw" {
		t.Fatalf("edge-a syncs fw and sw: %d, uncounted %q, views %+v; want 200, sw uncounted, fw's view", st, uncounted, rp)
	}
	b := batch("a1", 3, now, fwDelta("k", 1))
	b.Signals = []wire.Signal{{Limiter: "tb", Key: "k", Pause: sec}}
	if st, uncounted, _ := syncUncounted(t, srv, "edge-a", b); st != 200 || uncounted != "tb" {
		t.Fatalf("edge-a signals on tb: %d, uncounted %q; want 200, tb uncounted", st, uncounted)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 7 {
		t.Fatalf("fw count %d, want 7 (the batches' fw entries counted)", ks.Count)
	}
	if ks := getKey(t, c, "sw", "k"); ks.Count != 0 {
		t.Fatalf("sw count %d, want 0 (edge-a is not granted sw)", ks.Count)
	}
	if ks := getKey(t, c, "tb", "k"); ks.Upstream != nil && ks.Upstream.PausedNS > 0 {
		t.Fatalf("tb paused by edge-a's signal: %+v", ks.Upstream)
	}
	for _, tc := range []struct {
		token, method, path string
		missing             string // "" allowed
	}{
		{"edge-a", "GET", "/v1/limiters/fw/keys/k", "read"},
		{"edge-a", "GET", "/v1/limiters", "read"},
		{"edge-a", "GET", "/v1/isolates", "read"},
		{"edge-a", "GET", "/v1/limiters/fw/keys", "read"},
		{"edge-a", "DELETE", "/v1/limiters/fw/keys/k", "admin"},
		{"reader", "DELETE", "/v1/limiters/fw/keys/k", "admin"},
		{"edge-b", "DELETE", "/v1/limiters/fw/keys/k", "admin"},
		{"admin", "GET", "/v1/limiters/fw/keys/k", "read"},
		{"reader", "GET", "/v1/limiters/fw/keys/k", ""},
		{"reader", "GET", "/v1/limiters", ""},
		{"reader", "GET", "/v1/isolates", ""},
		{"edge-b", "GET", "/v1/limiters/fw/keys?top=5", ""},
		{"fleet", "GET", "/v1/limiters/fw/keys/k", ""},
	} {
		what := tc.token + " " + tc.method + " " + tc.path
		st, body := call(t, srv, tc.method, tc.path, tc.token)
		if tc.missing != "" {
			wantForbidden(t, what, st, body, tc.missing)
		} else if st != 200 {
			t.Fatalf("%s: %d %s, want 200", what, st, body)
		}
	}
	if st, _, p := syncAs(t, srv, "reader", batch("r1", 1, now, fwDelta("k", 1))); st != 403 || !strings.Contains(p.Detail, "edge") {
		t.Fatalf("reader syncs: %d %+v, want 403 naming edge", st, p)
	}
	if st, body := call(t, srv, "GET", "/v1/limiters", "nobody"); st != 401 {
		t.Fatalf("unknown token: %d %s, want 401", st, body)
	}
	if st, body := call(t, srv, "DELETE", "/v1/limiters/fw/keys/k", "admin"); st != 204 {
		t.Fatalf("admin resets: %d %s", st, body)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 0 {
		t.Fatalf("count %d after admin's reset, want 0", ks.Count)
	}
	if st, body := call(t, srv, "DELETE", "/v1/limiters/fw/keys/k", "fleet"); st != 204 {
		t.Fatalf("a token without roles resets: %d %s", st, body)
	}
}

// TestKeyViewShowsOwnIsolatesOnly is issue 21's probe of a key's view: two
// tokens' edges hold strict leases on one key (keys are one namespace: the
// fleet's limit); each token reading the key sees its own isolates' leases
// by their ids, never the other token's, and the lease sum of all.
func TestKeyViewShowsOwnIsolatesOnly(t *testing.T) {
	_, clk, srv := newTestServer(t, func(o *Options) {
		o.Grants = []Grant{{Token: "tok-a", Roles: RoleEdge | RoleRead}, {Token: "tok-b", Roles: RoleEdge | RoleRead}}
	})
	now := clk.now()
	strict := func(iso string) *wire.Batch {
		return batch(iso, 1, now, wire.Delta{Limiter: "sfw", Key: "k", Window: now / sec, Delta: 1, Demand: 10})
	}
	for _, s := range []struct{ token, iso string }{{"tok-a", "a1"}, {"tok-a", "a2"}, {"tok-b", "b1"}} {
		if st, rp, p := syncAs(t, srv, s.token, strict(s.iso)); st != 200 || viewOf(t, rp, "sfw", "k").Lease <= 0 {
			t.Fatalf("%s %s: %d %+v %+v", s.token, s.iso, st, rp, p)
		}
	}
	view := func(token string) map[string]int64 {
		st, body := call(t, srv, "GET", "/v1/limiters/sfw/keys/k", token)
		if st != 200 {
			t.Fatalf("%s reads: %d %s", token, st, body)
		}
		var ks struct {
			Leases   map[string]int64 `json:"leases"`
			LeaseSum int64            `json:"lease_sum"`
		}
		if err := json.Unmarshal(body, &ks); err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, n := range ks.Leases {
			sum += n
		}
		if ks.LeaseSum <= sum {
			t.Fatalf("%s: lease_sum %d, want the fleet's, above its own %d", token, ks.LeaseSum, sum)
		}
		return ks.Leases
	}
	a, b := view("tok-a"), view("tok-b")
	if keys(a) != "a1,a2" || keys(b) != "b1" {
		t.Fatalf("leases seen by tok-a %v, by tok-b %v; want a1,a2 and b1 only", a, b)
	}
}

// keys returns the sorted keys of m joined by ','.
func keys(m map[string]int64) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	if len(ks) > 1 && ks[0] > ks[1] {
		ks[0], ks[1] = ks[1], ks[0]
	}
	return strings.Join(ks, ",")
}

// TestParseTokens: the --token grammar.
func TestParseTokens(t *testing.T) {
	toks, grants, err := ParseTokens(" k0 , k1:edge=api|llm,k2:read+admin,,k3:edge ")
	if err != nil {
		t.Fatal(err)
	}
	want := []Grant{{Token: "k1", Roles: RoleEdge, Limiters: []string{"api", "llm"}},
		{Token: "k2", Roles: RoleRead | RoleAdmin}, {Token: "k3", Roles: RoleEdge}}
	if !reflect.DeepEqual(toks, []string{"k0"}) || !reflect.DeepEqual(grants, want) {
		t.Fatalf("tokens %q grants %+v", toks, grants)
	}
	for _, empty := range []string{",", " , ,"} {
		if _, _, err := ParseTokens(empty); err == nil {
			t.Errorf("ParseTokens(%q): no error; a list that names no token ran a coordinator without tokens", empty)
		}
	}
	for _, bad := range []string{"secret-token:writer", "secret-token:read=api", "secret-token:", "secret-token:edge+"} {
		if _, _, err := ParseTokens(bad); err == nil || strings.Contains(err.Error(), "secret-token") {
			t.Errorf("ParseTokens(%q) = %v, want an error that does not show the token", bad, err)
		}
	}
	cfg := testConfig()
	for _, o := range []Options{
		{Grants: []Grant{{Token: "x", Roles: RoleEdge, Limiters: []string{"nope"}}}},
		{Grants: []Grant{{Token: "x", Roles: RoleRead, Limiters: []string{"fw"}}}},
		{Grants: []Grant{{Token: "x"}}},
		{Tokens: []string{"x"}, Grants: []Grant{{Token: "x", Roles: RoleRead}}},
		// Tokens no client can send in "Authorization: Bearer ..." (fetch
		// refuses past Latin-1, Go's client refuses a newline).
		{Tokens: []string{"secr€t"}},
		{Tokens: []string{"secret\n"}},
		{Grants: []Grant{{Token: "two words", Roles: RoleEdge}}},
	} {
		o.InMemory, o.Config = true, cfg
		if c, err := Open(o); err == nil {
			c.Close()
			t.Errorf("Open with tokens %q, grants %+v succeeded", o.Tokens, o.Grants)
		}
	}
}

// TestEdgeOnlyTokenProbes: an edge host's health probe (GET /v1/limiters
// with its token) takes the 403 problem of a token with the edge role and
// not read as a live coordinator that knows the token; an unknown token
// still fails it.
func TestEdgeOnlyTokenProbes(t *testing.T) {
	_, _, srv := rolesServer(t)
	for _, tc := range []struct {
		token string
		ok    bool
	}{{"edge-a", true}, {"reader", true}, {"fleet", true}, {"nobody", false}} {
		err := (&syncloop.HTTPTransport{URL: srv.URL, Token: tc.token}).Probe(context.Background())
		if (err == nil) != tc.ok {
			t.Errorf("probe with %s: %v, want ok %v", tc.token, err, tc.ok)
		}
	}
}

// postJSON posts body to path with token and returns the status and body.
func postJSON(t *testing.T, srv *httptest.Server, path, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestAdminPausesKey: the admin role pauses a key fleet-wide (POST
// .../keys/{key} {"pause": "2h"}), capped at the limiter's max_pause (1 h
// by default); the edges syncing the key hear it in their replies; other
// roles get 403, bad bodies 400.
func TestAdminPausesKey(t *testing.T) {
	_, clk, srv := rolesServer(t)
	now := clk.now()
	if st, _, p := syncAs(t, srv, "edge-a", batch("a1", 1, now, fwDelta("k", 1))); st != 200 {
		t.Fatalf("edge-a: %d %+v", st, p)
	}
	for _, tok := range []string{"reader", "edge-a", "edge-b"} {
		st, body := postJSON(t, srv, "/v1/limiters/fw/keys/k", tok, `{"pause": "2h"}`)
		wantForbidden(t, tok+" pauses", st, body, "admin")
	}
	st, body := postJSON(t, srv, "/v1/limiters/fw/keys/k", "admin", `{"pause": "2h"}`)
	var ks struct {
		Upstream struct {
			PausedNS int64 `json:"paused_ns"`
		} `json:"upstream"`
	}
	if err := json.Unmarshal(body, &ks); st != 200 || err != nil || ks.Upstream.PausedNS != 3600*sec {
		t.Fatalf("admin pauses 2h: %d %s, want 200 and paused_ns of 1 h (the cap)", st, body)
	}
	st, rp, p := syncAs(t, srv, "edge-a", batch("a1", 2, now, fwDelta("k", 1)))
	if st != 200 || len(rp.Upstream) != 1 || rp.Upstream[0].Key != "k" || rp.Upstream[0].Pause != 3600*sec {
		t.Fatalf("edge-a's reply after the pause: %d %+v %+v, want the key's pause", st, rp, p)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"pause": "0s"}`, "pause"},
		{`{"pause": "soon"}`, "pause"},
		{`{"paws": "1m"}`, "body"},
		{`{"pause": "1m"} {"pause": "1m"}`, "body"},
	} {
		st, body := postJSON(t, srv, "/v1/limiters/fw/keys/k", "admin", tc.body)
		if p := decodeProblem(t, body); st != 400 || p.Field != tc.field {
			t.Errorf("pause %s: %d %+v, want 400 naming %s", tc.body, st, p, tc.field)
		}
	}
	// Who paused: the token's scope (a plain hash of it) for admins only;
	// a reader could test guesses of a weak admin token against it.
	scope := strings.TrimSuffix(tokenScope("admin"), "/")
	if st, body := postJSON(t, srv, "/v1/limiters/sw/pause", "admin", `{"for": "10m", "reason": "test"}`); st != 200 {
		t.Fatalf("admin pauses sw: %d %s", st, body)
	}
	for tok, wantScope := range map[string]bool{"fleet": true, "reader": false, "edge-b": false} { // fleet: every role
		st, body := call(t, srv, "GET", "/v1/control", tok)
		var v ControlView
		if err := json.Unmarshal(body, &v); st != 200 || err != nil || len(v.Pauses) != 1 {
			t.Fatalf("%s reads the control state: %d %s", tok, st, body)
		}
		by := v.Pauses[0].By
		if strings.Contains(by, scope) != wantScope || !strings.Contains(by, "(admin) from 127.0.0.1:") {
			t.Errorf("%s is told the pause was by %q (the admin token's scope shown: %v)", tok, by, !wantScope)
		}
	}
	if st, body := call(t, srv, "DELETE", "/v1/limiters/fw/keys/k", "admin"); st != 204 {
		t.Fatalf("reset: %d %s", st, body)
	}
	if st, body := call(t, srv, "GET", "/v1/limiters/fw/keys/k", "reader"); st != 200 || strings.Contains(string(body), "paused_ns") {
		t.Fatalf("after the reset: %d %s, want no pause", st, body)
	}
}

// TestEdgeGrantCoversAsksAndDenials: an edge token granted fw and sfw only
// cannot act on another limiter through the parts of a batch that are not
// entries: an amendment's ask for a strict ssw key (which would reserve
// that key's budget for the token's isolate, starving every other edge)
// and a final denial of an sw key (which would add to that limiter's
// denied totals on the dashboard, metrics and history) are taken out of
// the batch, named in Edgelimit-Uncounted, and act on nothing.
func TestEdgeGrantCoversAsksAndDenials(t *testing.T) {
	c, clk, srv := rolesServer(t)
	now := clk.now()
	if st, _, p := syncAs(t, srv, "edge-a", batch("a1", 1, now, fwDelta("k", 5))); st != 200 {
		t.Fatalf("edge-a syncs fw: %d %+v", st, p)
	}
	ask := coordtest.Amend(batch("a1", 1, now, fwDelta("k", 5)),
		wire.Ask{Limiter: "ssw", Key: "k", Window: now / sec, Cost: 100})
	if st, uncounted, _ := syncUncounted(t, srv, "edge-a", ask); st != 200 || uncounted != "ssw" {
		t.Fatalf("edge-a asks for ssw: %d, uncounted %q; want 200, ssw uncounted", st, uncounted)
	}
	if ks := getKey(t, c, "ssw", "k"); ks.LeaseSum != 0 {
		t.Fatalf("ssw/k lease sum %d after edge-a's ask, want 0", ks.LeaseSum)
	}
	dn := batch("a1", 2, now, fwDelta("k", 1))
	dn.Denials = []wire.Denial{{Limiter: "sw", Key: "k", Window: now / sec, Cost: 7}}
	if st, uncounted, _ := syncUncounted(t, srv, "edge-a", dn); st != 200 || uncounted != "sw" {
		t.Fatalf("edge-a reports sw denials: %d, uncounted %q; want 200, sw uncounted", st, uncounted)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 6 {
		t.Fatalf("fw/k count %d, want 6 (the fw entries counted once: the ask's batch is a retry)", ks.Count)
	}
	// Its own limiters' asks and denials pass.
	ok := batch("a1", 3, now, fwDelta("k", 1))
	ok.Denials = []wire.Denial{{Limiter: "fw", Key: "k", Window: now / sec, Cost: 1}}
	if st, _, p := syncAs(t, srv, "edge-a", ok); st != 200 {
		t.Fatalf("edge-a reports fw denials: %d %+v", st, p)
	}
}

// syncUncounted is syncAs for a batch that must be answered 200, with the
// reply's Edgelimit-Uncounted header.
func syncUncounted(t *testing.T, srv *httptest.Server, token string, b *wire.Batch) (int, string, *wire.Reply) {
	t.Helper()
	hdr := map[string]string{"Content-Type": MsgpackContentType}
	if token != "" {
		hdr["Authorization"] = "Bearer " + token
	}
	st, body, h := httpPostHdr(t, srv, MsgpackContentType, b.AppendMsg(nil), hdr)
	if st != 200 {
		return st, "", nil
	}
	var rp wire.Reply
	if err := rp.UnmarshalMsg(body); err != nil {
		t.Fatal(err)
	}
	return st, h.Get("Edgelimit-Uncounted"), &rp
}

// A limiter paused as a whole is told only to tokens granted it: a token of
// other limiters learnt of every limiter's pause (its name and how long).
func TestLimiterPauseToldOnlyToGrantedTokens(t *testing.T) {
	_, clk, srv := rolesServer(t)
	now := clk.now()
	for _, lim := range []string{"fw", "sw"} {
		if st, body := postJSON(t, srv, "/v1/limiters/"+lim+"/pause", "admin", `{"for": "10m", "reason": "test"}`); st != 200 {
			t.Fatalf("admin pauses %s: %d %s", lim, st, body)
		}
	}
	st, rp, p := syncAs(t, srv, "edge-a", batch("a1", 1, now, fwDelta("k", 1)))
	if st != 200 {
		t.Fatalf("edge-a: %d %+v", st, p)
	}
	if len(rp.Paused) != 1 || rp.Paused[0].Limiter != "fw" {
		t.Fatalf("edge-a (granted fw and sfw) told the paused limiters %+v, want fw only", rp.Paused)
	}
	st, rp, p = syncAs(t, srv, "edge-b", batch("b1", 1, now, fwDelta("k", 1)))
	if st != 200 || len(rp.Paused) != 2 {
		t.Fatalf("edge-b (every limiter): %d, told %+v (%+v), want fw and sw", st, rp.Paused, p)
	}
}

// The metrics name the limiters and their totals, as GET /v1/limiters
// does: they need the read role (before, any client read them).
func TestMetricsNeedTheReadRole(t *testing.T) {
	_, _, srv := rolesServer(t)
	for _, tc := range []struct {
		token string
		want  int
	}{{"", 401}, {"edge-a", 403}, {"reader", 200}, {"fleet", 200}} {
		st, body := call(t, srv, "GET", "/metrics", tc.token)
		if st != tc.want {
			t.Errorf("GET /metrics with %q: %d, want %d (%.100s)", tc.token, st, tc.want, body)
		}
		if st == 200 && !strings.Contains(string(body), "edgelimit_coordinator_") {
			t.Errorf("GET /metrics with %q: no coordinator series", tc.token)
		}
	}
}

// The reset notices a reply carries name only keys of limiters the token's
// edge role is granted: a key of another limiter is another client's name
// (before, an edge-only token was told every reset key of every limiter,
// and a new isolate sending an old reset generation got the whole log).
func TestResetNoticesOfGrantedLimitersOnly(t *testing.T) {
	_, clk, srv := rolesServer(t)
	now := clk.now()
	st, first, _ := syncAs(t, srv, "edge-a", batch("a1", 1, now, fwDelta("k", 1)))
	if st != 200 {
		t.Fatalf("edge-a: %d", st)
	}
	for _, path := range []string{"/v1/limiters/fw/keys/mine", "/v1/limiters/tb/keys/theirs", "/v1/limiters/sw/keys/theirs-too"} {
		if st, body := call(t, srv, "DELETE", path, "admin"); st != 204 {
			t.Fatalf("reset %s: %d %s", path, st, body)
		}
	}
	b := batch("a1", 2, now, fwDelta("k", 1))
	b.ResetGen = first.ResetGen
	if b.ResetGen == 0 {
		t.Fatal("the coordinator keeps no reset generation")
	}
	st, rp, _ := syncAs(t, srv, "edge-a", b)
	if st != 200 {
		t.Fatalf("edge-a's next batch: %d", st)
	}
	var told []string
	for _, r := range rp.Resets {
		told = append(told, r.Limiter+"/"+r.Key)
	}
	if !reflect.DeepEqual(told, []string{"fw/mine"}) {
		t.Fatalf("edge-a told of resets %q, want only fw/mine (it is granted fw and sfw)", told)
	}
	// A token granted every limiter is told all three.
	b = batch("b1", 1, now, fwDelta("k", 1))
	b.ResetGen = first.ResetGen
	if st, rp, _ = syncAs(t, srv, "edge-b", b); st != 200 || len(rp.Resets) != 3 {
		t.Fatalf("edge-b: %d, resets %+v; want the three", st, rp.Resets)
	}
}
