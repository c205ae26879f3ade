package coordinator

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestVersionMismatch: a batch of another protocol version is refused
// with 400, code version_mismatch and a detail naming both versions, even
// when the rest of it would not decode as this version's batch; nothing of
// it is applied.
func TestVersionMismatch(t *testing.T) {
	good := wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 5}
	// A future batch whose "e" is a map: it does not decode as version 1.
	future := wire.AppendMapHeader(nil, 3)
	future = wire.AppendString(future, "e")
	future = wire.AppendMapHeader(future, 0)
	future = wire.AppendString(future, "v")
	future = wire.AppendInt(future, 7)
	future = wire.AppendString(future, "iso")
	future = wire.AppendString(future, "a")
	for _, tc := range []struct {
		name string
		body []byte
		got  int64
	}{
		{"older", (&wire.Batch{Version: 0, Isolate: "a", Seq: 1, Entries: []wire.Delta{good}}).AppendMsg(nil), 0},
		{"newer", (&wire.Batch{Version: 2, Isolate: "a", Seq: 1, Entries: []wire.Delta{good}}).AppendMsg(nil), 2},
		{"newer, another layout", future, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, srv := newTestServer(t, nil)
			status, body := httpPost(t, srv, MsgpackContentType, tc.body, nil)
			var p VersionProblem
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("%d %s: %v", status, body, err)
			}
			if status != 400 || p.Code != "version_mismatch" || p.Type != "urn:edgelimit:problem:version" ||
				p.Got != tc.got || p.Want != wire.Version || p.Field != "v" {
				t.Fatalf("%d %+v", status, p)
			}
			for _, want := range []string{"protocol version " + itoa(tc.got), "speaks version " + itoa(wire.Version)} {
				if !strings.Contains(p.Detail, want) {
					t.Fatalf("detail %q does not say %q", p.Detail, want)
				}
			}
			if ks := getKey(t, c, "fw", "k"); ks.Count != 0 {
				t.Fatalf("a refused batch was applied: %+v", ks)
			}
		})
	}
}

func itoa(v int64) string { b, _ := json.Marshal(v); return string(b) }

// TestBatchVersion: the version is found wherever "v" sits among the
// batch's keys, and a body that is not a map has none.
func TestBatchVersion(t *testing.T) {
	b := (&wire.Batch{Version: 1, Isolate: "a", Seq: 3, End: true, Entries: []wire.Delta{{Limiter: "fw", Key: "k", Delta: 1}}}).AppendMsg(nil)
	if v, ok := batchVersion(b); !ok || v != 1 {
		t.Fatalf("batchVersion = %d, %v", v, ok)
	}
	for _, body := range [][]byte{nil, []byte("hello"), {0x81, 0xa1, 'x', 0x01}} {
		if v, ok := batchVersion(body); ok {
			t.Fatalf("batchVersion(%q) = %d, true", body, v)
		}
	}
}
