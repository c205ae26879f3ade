package isolate

import (
	"context"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestReincarnateThroughModule: the module's el_reincarnate makes the
// outstanding batch batch 1 of a new id (the configured id and a suffix),
// with the same deltas and a new secret (every batch carries its
// incarnation's: 32 hex digits, a new one each time).
func TestReincarnateThroughModule(t *testing.T) {
	ctx := context.Background()
	_, iso := newTestIsolate(t, testConfig("iso-7"), Options{})
	if _, err := iso.Decide(ctx, 0, "k", 3, 5e9); err != nil {
		t.Fatal(err)
	}
	out, err := iso.SyncOut(ctx, 5e9, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b0, b1 wire.Batch
	if err := b0.UnmarshalMsg(out); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]bool{b0.Secret: true}
	if len(b0.Secret) != 32 || strings.Trim(b0.Secret, "0123456789abcdef") != "" {
		t.Fatalf("first batch's secret %q, want 32 hex digits", b0.Secret)
	}
	for life := 0; life < 2; life++ { // a second refusal gets another new id
		prev := iso.ID()
		if err := iso.Reincarnate(ctx); err != nil {
			t.Fatal(err)
		}
		if id := iso.ID(); id == prev || !strings.HasPrefix(id, "iso-7~") || len(id) != len("iso-7~")+12 {
			t.Fatalf("id %q after reincarnating %q", id, prev)
		}
		out, err = iso.SyncOut(ctx, 6e9, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b1.UnmarshalMsg(out); err != nil {
			t.Fatal(err)
		}
		if b1.Isolate != iso.ID() || b1.Seq != 1 || b1.At != b0.At || len(b1.Entries) != 1 || b1.Entries[0] != b0.Entries[0] {
			t.Fatalf("resent batch %+v, want %+v as seq 1 of %s", b1, b0, iso.ID())
		}
		if len(b1.Secret) != 32 || secrets[b1.Secret] || b1.Secret != iso.Config().IsolateSecret {
			t.Fatalf("incarnation %d's secret %q: want a new one of 32 hex digits, the isolate's", life+1, b1.Secret)
		}
		secrets[b1.Secret] = true
	}
}

func TestIncarnationIDFits(t *testing.T) {
	long := strings.Repeat("x", wire.MaxIsolateIDLen)
	if id := incarnationID(long, 1); len(id) != wire.MaxIsolateIDLen || !strings.HasSuffix(id, "~000000000001") {
		t.Fatalf("incarnationID of a %d-byte id = %q (%d bytes)", len(long), id, len(id))
	}
}
