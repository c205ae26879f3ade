package coordinator

import (
	"bytes"
	"io"
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
		{"unknown limiter", MsgpackContentType, enc(batch("a", 1, 0, good, wire.Delta{Limiter: "nope", Key: "k", Delta: 1})), 400, "e[1].limiter", "unknown_limiter"},
		{"key too long", MsgpackContentType, enc(batch("a", 1, 0, good, wire.Delta{Limiter: "fw", Key: strings.Repeat("x", wire.MaxKeyLen+1), Window: 1000, Delta: 1})), 400, "e[1].key", "invalid"},
		{"no isolate", MsgpackContentType, enc(batch("", 1, 0, good)), 400, "iso", "invalid"},
		{"seq zero", MsgpackContentType, enc(batch("a", 0, 0, good)), 400, "seq", "invalid"},
		{"wrong content type", "application/json", enc(batch("a", 1, 0, good)), 415, "Content-Type", "content_type"},
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
	}{{"", 401}, {"Bearer wrong", 401}, {"edge-1", 401}, {"Bearer edge-", 401}, {"Bearer edge-2", 200}, {"Bearer edge-1", 200}} {
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
