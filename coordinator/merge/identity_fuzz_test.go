package merge

import (
	"errors"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// FuzzIsolateIdentity: an isolate id bound to a secret by its first batch
// (sequence.go) accepts a later batch only with that secret; any other
// (none, another, a malformed one) is refused, as SeqIdentity telling no
// sequence number (or as a bad field), whatever its seq, and changes
// nothing: the isolate's next batch still applies. The high-water mark
// keeps the secret's hash through its encoding.
func FuzzIsolateIdentity(f *testing.F) {
	f.Add("0123456789abcdef0123456789abcdef", "", int64(2))
	f.Add("0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdeX", int64(1))
	f.Add("", "0123456789abcdef0123456789abcdef", int64(2))
	f.Add("0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef", int64(1<<40))
	f.Add("short", "x", int64(-1))
	f.Fuzz(func(t *testing.T, secret, probe string, seq int64) {
		if !wire.ValidSecret(secret) {
			secret = "" // an isolate without one
		}
		m, err := NewMerger(testConfig(), newMemStore(), MergerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mk := func(seq int64, secret string, d int64) *wire.Batch {
			return &wire.Batch{Version: wire.Version, Isolate: "iso", Secret: secret, Seq: seq, At: t0,
				Entries: []wire.Delta{{Limiter: "fw", Key: "k", Window: t0 / sec, Delta: d}}}
		}
		if _, err := m.Apply(mk(1, secret, 1), t0); err != nil {
			t.Fatal(err)
		}
		_, err = m.Apply(mk(seq, probe, 1000), t0)
		var se *SeqError
		var fe *wire.FieldError
		switch {
		case probe != secret && errors.As(err, &se):
			if se.Anomaly != SeqIdentity || se.Seq != 0 || se.HighWater != 0 || strings.ContainsAny(se.Error(), "0123456789") {
				t.Fatalf("another secret's batch: %+v %q, want SeqIdentity telling no number", se, se.Error())
			}
		case probe != secret && errors.As(err, &fe):
			if wire.ValidSecret(probe) && seq >= 1 {
				t.Fatalf("a valid batch refused as a bad field: %v", err)
			}
		case probe != secret:
			t.Fatalf("a batch with secret %q for an id bound to %q: %v, want refused", probe, secret, err)
		case err != nil && errors.As(err, &se) && se.Anomaly == SeqIdentity:
			t.Fatalf("the isolate's own secret refused: %v", err)
		}
		if probe != secret || err != nil {
			// Nothing changed: the isolate's seq 2 applies.
			if _, err := m.Apply(mk(2, secret, 1), t0); err != nil {
				t.Fatalf("the isolate's next batch after a refused one: %v", err)
			}
			ks, err := m.KeyState("fw", "k", t0)
			if err != nil || ks.Count != 2 {
				t.Fatalf("count %+v %v, want 2", ks, err)
			}
		}
		h := m.hwms["iso"]
		var back hwmState
		if err := back.decode(h.encode(nil)); err != nil || back.secret != h.secret || back.seq != h.seq || back.sum != h.sum {
			t.Fatalf("high-water mark round trip: %+v -> %+v, %v", h, back, err)
		}
		if !back.holds(secret) || secret != probe && wire.ValidSecret(probe) && back.holds(probe) {
			t.Fatalf("decoded mark holds the wrong secret")
		}
		back.decode([]byte(probe)) // arbitrary bytes: an error, never a panic
	})
}
