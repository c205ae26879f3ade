package coordinator

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

func newTestServer(t *testing.T, mod func(*Options)) (*Coordinator, *fakeClock, *httptest.Server) {
	c, clk := newTestCoordinator(t, t0, mod)
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return c, clk, srv
}

func TestHTTPSyncRoundTrip(t *testing.T) {
	_, clk, srv := newTestServer(t, nil)
	b := batch("a", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 3, Demand: 4})
	status, body := httpPost(t, srv, MsgpackContentType, b.AppendMsg(nil), nil)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var rp wire.Reply
	if err := rp.UnmarshalMsg(body); err != nil {
		t.Fatal(err)
	}
	if v := viewOf(t, &rp, "fw", "k"); v.Count != 3 || rp.Seq != 1 {
		t.Fatalf("reply %+v", rp)
	}
	// Admin GET and DELETE.
	resp, err := http.Get(srv.URL + "/v1/limiters/fw/keys/k")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(out), `"count":3`) {
		t.Fatalf("GET %d %s", resp.StatusCode, out)
	}
	req, _ := http.NewRequest("DELETE", srv.URL+"/v1/limiters/fw/keys/k", nil)
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != 204 {
		t.Fatalf("DELETE %v %v", resp, err)
	}
	resp, _ = http.Get(srv.URL + "/v1/limiters/nope/keys/k")
	if resp.StatusCode != 404 {
		t.Fatalf("GET unknown limiter: %d", resp.StatusCode)
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", path, resp, err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/metrics" && !strings.Contains(string(out), "edgelimit_coordinator_deltas_applied_total 1") {
			t.Fatalf("metrics:\n%s", out)
		}
	}
}

// TestHTTPBadInput: each bad request gets a 4xx problem naming the field,
// and nothing of it is applied (the same Seq is applied afterwards).
func TestHTTPBadInput(t *testing.T) {
	good := wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 5}
	enc := func(b *wire.Batch) []byte { return b.AppendMsg(nil) }
	many := make([]wire.Delta, wire.MaxBatchEntries+1)
	for i := range many {
		many[i] = good
	}
	cases := []struct {
		name   string
		ctype  string
		body   []byte
		status int
		field  string
		kind   string
	}{
		{"malformed msgpack", MsgpackContentType, []byte{0x85, 0xa1, 'v'}, 400, "body", "malformed"},
		{"not a map", MsgpackContentType, []byte("hello"), 400, "body", "malformed"},
		{"trailing bytes", MsgpackContentType, append(enc(batch("a", 1, 0, good)), 0xc0), 400, "body", "malformed"},
		{"wrong version", MsgpackContentType, enc(&wire.Batch{Version: 2, Isolate: "a", Seq: 1, Entries: []wire.Delta{good}}), 400, "v", "version"},
		{"oversized", MsgpackContentType, make([]byte, DefaultMaxBodyBytes+1), 413, "body", "too_large"},
		{"too many entries", MsgpackContentType, enc(batch("a", 1, 0, many...)), 400, "e", "too_many_entries"},
		{"negative delta", MsgpackContentType, enc(batch("a", 1, 0, good, wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: -1})), 400, "e[1].delta", "invalid"},
		{"key too long", MsgpackContentType, enc(batch("a", 1, 0, good, wire.Delta{Limiter: "fw", Key: strings.Repeat("x", wire.MaxKeyLen+1), Window: 1000, Delta: 1})), 400, "e[1].key", "invalid"},
		{"no isolate", MsgpackContentType, enc(batch("", 1, 0, good)), 400, "iso", "invalid"},
		{"seq zero", MsgpackContentType, enc(batch("a", 0, 0, good)), 400, "seq", "invalid"},
		{"wrong content type", "application/json", enc(batch("a", 1, 0, good)), 415, "Content-Type", "content_type"},
		{"entries declared, not sent", MsgpackContentType, declared("e"), 400, "body", "malformed"},
		{"signals declared, not sent", MsgpackContentType, declared("up"), 400, "body", "malformed"},
		{"denials declared, not sent", MsgpackContentType, declared("dn"), 400, "body", "malformed"},
		{"asks declared, not sent", MsgpackContentType, declared("ak"), 400, "body", "malformed"},
		{"map declared, not sent", MsgpackContentType, []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, 400, "body", "malformed"},
		{"deep nesting", MsgpackContentType, nested(64), 400, "body", "malformed"},
		{"float seq", MsgpackContentType, withField(batch("a", 1, 0, good), "seq", []byte{0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0}), 400, "body", "malformed"},
		{"seq 2^64-1", MsgpackContentType, withField(batch("a", 1, 0, good), "seq", []byte{0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}), 400, "body", "malformed"},
		{"negative seq", MsgpackContentType, enc(batch("a", -1, 0, good)), 400, "seq", "invalid"},
		{"negative window", MsgpackContentType, enc(batch("a", 1, 0, wire.Delta{Limiter: "fw", Key: "k", Window: -1, Delta: 1})), 400, "e[0].window", "invalid"},
		{"demand past 2^50", MsgpackContentType, enc(batch("a", 1, 0, wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1, Demand: wire.MaxLimit + 1})), 400, "e[0].demand", "invalid"},
		{"time far ahead", MsgpackContentType, enc(batch("a", 1, 1<<62, good)), 400, "at", "clock_skew"},
		{"window far ahead", MsgpackContentType, enc(batch("a", 1, 0, wire.Delta{Limiter: "fw", Key: "k", Window: 1 << 62, Delta: 1})), 400, "e[0].window", "clock_skew"},
		{"isolate id too long", MsgpackContentType, enc(batch(strings.Repeat("i", wire.MaxIsolateIDLen+1), 1, 0, good)), 400, "iso", "invalid"},
		{"secret too short", MsgpackContentType, enc(&wire.Batch{Version: wire.Version, Isolate: "a", Secret: "short", Seq: 1, Entries: []wire.Delta{good}}), 400, "sec", "invalid"},
		{"negative reset generation", MsgpackContentType, withField(batch("a", 1, 0, good), "rg", []byte{0xff}), 400, "rg", "invalid"},
		{"signal pause past 372 days", MsgpackContentType, enc(&wire.Batch{Version: wire.Version, Isolate: "a", Seq: 1, Entries: []wire.Delta{good},
			Signals: []wire.Signal{{Limiter: "fw", Key: "k", Pause: wire.MaxPeriod*12 + 1}}}), 400, "up[0].pause", "invalid"},
		{"ask of cost 0", MsgpackContentType, enc(&wire.Batch{Version: wire.Version, Isolate: "a", Seq: 1, Entries: []wire.Delta{good},
			Asks: []wire.Ask{{Limiter: "sfw", Key: "k", Window: 1000}}}), 400, "ak[0].cost", "invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, clk, srv := newTestServer(t, nil)
			status, body := httpPost(t, srv, tc.ctype, tc.body, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			p := decodeProblem(t, body)
			if p.Field != tc.field || p.Status != tc.status || p.Type != "urn:edgelimit:problem:"+tc.kind || p.Detail == "" {
				t.Fatalf("problem %+v, want field %q kind %q", p, tc.field, tc.kind)
			}
			if ks := getKey(t, c, "fw", "k"); ks.Count != 0 {
				t.Fatalf("bad batch partly applied: %+v", ks)
			}
			// The same Seq still applies: the high-water mark did not move.
			status, body = httpPost(t, srv, MsgpackContentType, enc(batch("a", 1, clk.now(), good)), nil)
			if status != 200 {
				t.Fatalf("good batch: %d %s", status, body)
			}
			if ks := getKey(t, c, "fw", "k"); ks.Count != 5 {
				t.Fatalf("after good batch: %+v", ks)
			}
		})
	}
}

// declared returns a batch map whose field f is an array header declaring
// wire.MaxBatchEntries elements that the body does not hold.
func declared(f string) []byte {
	b := wire.AppendString(wire.AppendMapHeader(nil, 1), f)
	return wire.AppendArrayHeader(b, wire.MaxBatchEntries)
}

// nested returns a batch map with an unknown field holding arrays nested
// depth deep.
func nested(depth int) []byte {
	b := wire.AppendString(wire.AppendMapHeader(nil, 1), "zz")
	for range depth {
		b = wire.AppendArrayHeader(b, 1)
	}
	return append(b, 0xc0)
}

// withField returns b encoded with one more map field f holding the raw
// msgpack value v (decoded after b's own fields: a later field wins).
func withField(b *wire.Batch, f string, v []byte) []byte {
	enc := b.AppendMsg(nil)
	n := int(enc[0] & 0x0f) // AppendMsg writes a fixmap
	out := append(wire.AppendMapHeader(nil, n+1), enc[1:]...)
	// The entries array is the last field: put the new one before "v".
	i := bytes.Index(out, wire.AppendString(nil, "v"))
	return append(append(append(out[:i:i], wire.AppendString(nil, f)...), v...), out[i:]...)
}

func TestHTTPOversizedChunked(t *testing.T) {
	_, _, srv := newTestServer(t, func(o *Options) { o.MaxBodyBytes = 1024 })
	req, _ := http.NewRequest("POST", srv.URL+"/v1/sync", io.MultiReader(bytes.NewReader(make([]byte, 2048))))
	req.ContentLength = -1 // chunked: the cap is enforced while reading
	req.Header.Set("Content-Type", MsgpackContentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if p := decodeProblem(t, out); resp.StatusCode != 413 || p.Field != "body" {
		t.Fatalf("%d %+v", resp.StatusCode, p)
	}
}

func TestHTTPBearerToken(t *testing.T) {
	_, clk, srv := newTestServer(t, func(o *Options) { o.Tokens = []string{"edge-1", "edge-2"} })
	body := batch("a", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1}).AppendMsg(nil)
	for _, tc := range []struct {
		hdr    string
		status int
	}{{"", 401}, {"Bearer wrong", 401}, {"edge-1", 401}, {"Bearer edge-", 401}, {"Bearer edge-2", 200}, {"Bearer edge-1", 200},
		// The scheme's name is case-insensitive (RFC 9110): "bearer" was a 401.
		{"bearer edge-1", 200}, {"BEARER  edge-2", 200}, {"Basic edge-1", 401}, {"Bearer ", 401}, {"Bearer", 401}} {
		status, out := httpPost(t, srv, MsgpackContentType, body, map[string]string{"Authorization": tc.hdr})
		if status != tc.status {
			t.Fatalf("Authorization %q: %d %s", tc.hdr, status, out)
		}
	}
	resp, _ := http.Get(srv.URL + "/v1/limiters/fw/keys/k")
	if resp.StatusCode != 401 {
		t.Fatalf("admin without token: %d", resp.StatusCode)
	}
	if resp, _ := http.Get(srv.URL + "/healthz"); resp.StatusCode != 200 {
		t.Fatalf("healthz needs no token: %d", resp.StatusCode)
	}
}

// A batch's items of a limiter the coordinator does not run (an edge
// configured with one the coordinator lacks, or one removed from its
// configuration while edges run it) are not counted, and the rest of the
// batch is: refused whole, as before, the batch was resent as it was, and
// its isolate's counts never arrived again. The reply names the limiter in
// Edgelimit-Uncounted, the metric counts the items, and a retry is
// recognised as the batch applied.
func TestUnknownLimiterNotCounted(t *testing.T) {
	c, _, srv := newTestServer(t, nil)
	b := &wire.Batch{Version: wire.Version, Isolate: "a", Seq: 1,
		Entries: []wire.Delta{{Limiter: "fw", Key: "k", Window: 1000, Delta: 3}, {Limiter: "nope", Key: "k", Window: 1000, Delta: 1}},
		Denials: []wire.Denial{{Limiter: "nope", Key: "k", Window: 1000, Cost: 1}},
		Signals: []wire.Signal{{Limiter: "nope", Key: "k", Pause: sec}}}
	for try := 0; try < 2; try++ { // the batch, then its retry
		st, uncounted, rp := syncUncounted(t, srv, "", b)
		if st != 200 || uncounted != "nope" || rp == nil || len(rp.Entries) != 1 || rp.Entries[0].Limiter != "fw" {
			t.Fatalf("try %d: %d, uncounted %q, reply %+v; want 200, nope uncounted, fw's view", try, st, uncounted, rp)
		}
		if ks := getKey(t, c, "fw", "k"); ks.Count != 3 {
			t.Fatalf("try %d: fw count %d, want 3 (counted once)", try, ks.Count)
		}
	}
	st, body := call(t, srv, "GET", "/metrics", "")
	if st != 200 || !strings.Contains(string(body), `edgelimit_coordinator_entries_uncounted_total{reason="unknown_limiter"} 6`) {
		t.Fatalf("metrics: %d, want 6 items uncounted (3 per try):\n%s", st, grepLines(string(body), "uncounted"))
	}
	// The next batch goes on as usual.
	if st, _, _ := syncUncounted(t, srv, "", batch("a", 2, 0, wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1})); st != 200 {
		t.Fatalf("next batch: %d", st)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 4 {
		t.Fatalf("fw count %d after the next batch, want 4", ks.Count)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestUncountedNamesReadable: a batch may name a limiter with any bytes;
// the Edgelimit-Uncounted header names it percent-encoded, so the client
// can read the reply (raw, a NUL or a line break in the name made Go's
// client fail with "malformed MIME header line" on every retry).
func TestUncountedNamesReadable(t *testing.T) {
	c, _, srv := newTestServer(t, nil)
	b := &wire.Batch{Version: wire.Version, Isolate: "a", Seq: 1,
		Entries: []wire.Delta{{Limiter: "fw", Key: "k", Window: 1000, Delta: 3}, {Limiter: "bad\x00\r\nX-Evil: 1,%", Key: "k", Window: 1000, Delta: 1}}}
	st, uncounted, rp := syncUncounted(t, srv, "", b)
	if st != 200 || rp == nil || uncounted != "bad%00%0D%0AX-Evil:%201%2C%25" {
		t.Fatalf("%d, uncounted %q, reply %+v", st, uncounted, rp)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 3 {
		t.Fatalf("fw count %d, want 3", ks.Count)
	}
	if got := headerNames([]string{"api", "llm-6rps"}); got != "api,llm-6rps" {
		t.Fatalf("plain names: %q", got)
	}
}

// TestUncountedLogBoundPerToken: the log lines of uncounted limiters are
// bounded per token, so one token naming made-up limiters does not use up
// another's: with one bound for all, a client's 1,024 names left another
// token's real misconfiguration unlogged.
func TestUncountedLogBoundPerToken(t *testing.T) {
	c, _, _ := newTestServer(t, nil)
	var logs bytes.Buffer
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	for i := range 2000 {
		c.noteUncounted("att/", "iso", []string{fmt.Sprintf("junk%d", i)}, []string{uncountedUnknown}, nil)
	}
	c.noteUncounted("vic/", "iso-v", []string{"misconfigured"}, []string{uncountedUnknown}, nil)
	if n := strings.Count(logs.String(), "scope=att/"); n != maxUncountedLogged+1 {
		t.Errorf("%d lines for the flooding token, want %d and one saying the rest are not logged", n, maxUncountedLogged+1)
	}
	if !strings.Contains(logs.String(), "limiter=misconfigured") {
		t.Errorf("the other token's uncounted limiter was not logged")
	}
}
