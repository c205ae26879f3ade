package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestBatchPredecessorChecked: a batch names a predecessor (Prev) only
// with its secret, never itself, within the id's length; each refusal
// names its field, and a valid one survives the round trip.
func TestBatchPredecessorChecked(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		prev, prevSecret, field string
	}{
		{"", secret, "pvs"},
		{"iso-1", "", "pvs"},
		{"iso-1", "short", "pvs"},
		{"iso-2", "", ""}, // placeholder replaced below
		{strings.Repeat("p", wire.MaxIsolateIDLen+1), secret, "pv"},
	} {
		b := wire.Batch{Version: wire.Version, Isolate: "iso-2", Seq: 1, At: 1, Prev: tc.prev, PrevSecret: tc.prevSecret}
		if tc.prev == "iso-2" {
			b.PrevSecret, tc.field = secret, "pv" // its own id
		}
		err := b.Validate() // UnmarshalMsg's last step (pvs alone is not encoded)
		var fe *wire.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("prev %.10q, secret %q: %v; want an error naming %s", tc.prev, tc.prevSecret, err, tc.field)
		}
	}
	b := wire.Batch{Version: wire.Version, Isolate: "iso-1~2", Seq: 1, At: 1, Prev: "iso-1", PrevSecret: secret}
	var got wire.Batch
	if err := got.UnmarshalMsg(b.AppendMsg(nil)); err != nil || got.Prev != b.Prev || got.PrevSecret != secret {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}
