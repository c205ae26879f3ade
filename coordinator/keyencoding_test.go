package coordinator

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// oddKeys are keys a path of their text cannot carry: not UTF-8, dot
// segments, slashes, percent signs, and the longest key.
var oddKeys = []string{"\xff\xfeab", ".", "..", "a/b", "/", "100%", "%2e%2e", "\xef\xbf\xbd",
	strings.Repeat("\xffk/.", wire.MaxKeyLen/4)}

// TestResetAnyKeyByBase64 is issue 21's dashboard probe over HTTP: every
// key, whatever its bytes, is read and reset by
// /v1/limiters/{name}/keys/{base64url}?encoding=base64url, and the reset
// clears that key only (the invalid-UTF-8 key used to reset the key
// "\ufffd" instead, and "." and ".." could not be named).
func TestResetAnyKeyByBase64(t *testing.T) {
	c, clk, srv := newTestServer(t, nil)
	now := clk.now()
	var ds []wire.Delta
	for _, k := range append([]string{"keep"}, oddKeys...) {
		ds = append(ds, fwDelta(k, 3))
	}
	if st, _, p := syncAs(t, srv, "", batch("iso", 1, now, ds...)); st != 200 {
		t.Fatalf("sync: %d %+v", st, p)
	}
	for i, k := range oddKeys {
		path := "/v1/limiters/fw/keys/" + base64.RawURLEncoding.EncodeToString([]byte(k)) + "?encoding=base64url"
		if st, body := call(t, srv, "GET", path, ""); st != 200 || !strings.Contains(string(body), `"count":3`) {
			t.Fatalf("GET key %q: %d %s", k, st, body)
		}
		if st, body := call(t, srv, "DELETE", path, ""); st != 204 {
			t.Fatalf("DELETE key %q: %d %s", k, st, body)
		}
		if ks := getKey(t, c, "fw", k); ks.Count != 0 {
			t.Fatalf("key %q counts %d after its reset", k, ks.Count)
		}
		for _, other := range append([]string{"keep"}, oddKeys[i+1:]...) {
			if ks := getKey(t, c, "fw", other); ks.Count != 3 {
				t.Fatalf("key %q counts %d after the reset of %q, want 3", other, ks.Count, k)
			}
		}
	}
	// Padded base64url is taken too.
	if st, body := call(t, srv, "DELETE", "/v1/limiters/fw/keys/a2VlcA==?encoding=base64url", ""); st != 204 || getKey(t, c, "fw", "keep").Count != 0 {
		t.Fatalf("DELETE padded keep: %d %s", st, body)
	}
	for _, tc := range []struct{ path, field string }{
		{"/v1/limiters/fw/keys/!!?encoding=base64url", "key"},
		{"/v1/limiters/fw/keys/" + base64.RawURLEncoding.EncodeToString(make([]byte, wire.MaxKeyLen+1)) + "?encoding=base64url", "key"},
		{"/v1/limiters/fw/keys/?encoding=base64url", "key"},
		{"/v1/limiters/fw/keys/abc?encoding=hex", "encoding"},
	} {
		st, body := call(t, srv, "DELETE", tc.path, "")
		if p := decodeProblem(t, body); st != 400 || p.Field != tc.field {
			t.Fatalf("DELETE %s: %d %+v, want 400 naming %s", tc.path, st, p, tc.field)
		}
	}
}
