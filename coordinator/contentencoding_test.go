package coordinator

import (
	"bytes"
	"compress/gzip"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestCompressedBodyRefused: a body with a content coding the coordinator
// does not decode is refused with 415 naming Content-Encoding (it read as
// malformed msgpack, 400), and nothing of it is applied; identity is fine.
func TestCompressedBodyRefused(t *testing.T) {
	c, clk, srv := newTestServer(t, nil)
	good := wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 5}
	raw := batch("a", 1, clk.now(), good).AppendMsg(nil)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	status, body, hdr := httpPostHdr(t, srv, MsgpackContentType, gz.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	if status != 415 {
		t.Fatalf("gzip body: status %d, want 415: %s", status, body)
	}
	if p := decodeProblem(t, body); p.Field != "Content-Encoding" || p.Type != "urn:edgelimit:problem:content_encoding" {
		t.Fatalf("problem %+v", p)
	}
	if got := hdr.Get("Accept-Encoding"); got != "identity" {
		t.Fatalf("Accept-Encoding %q, want identity", got)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 0 {
		t.Fatalf("a refused body was applied: %+v", ks)
	}
	if status, body := httpPost(t, srv, MsgpackContentType, raw, map[string]string{"Content-Encoding": "identity"}); status != 200 {
		t.Fatalf("identity: status %d: %s", status, body)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 5 {
		t.Fatalf("after the identity batch: %+v", ks)
	}
}
