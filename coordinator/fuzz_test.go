package coordinator

import (
	"errors"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// FuzzDecodeBatch runs the request decoder of POST /v1/sync on arbitrary
// bytes: it must never panic, every error must name a field, and every
// batch it accepts must re-encode to bytes that decode to the same batch.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(batch("a", 1, 5, wire.Delta{Limiter: "fw", Key: "k", Window: 3, Delta: 1, Demand: 2}).AppendMsg(nil))
	f.Add(batch("iso", 1<<40, -1).AppendMsg(nil))
	f.Add([]byte{0x85, 0xa1, 'v', 0x01})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x81, 0xa1, 'e', 0xdd, 0x7f, 0xff, 0xff, 0xff})
	m, err := merge.NewMerger(testConfig(), nil, merge.MergerOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := DecodeBatch(body)
		if err != nil {
			var fe *wire.FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			return
		}
		again, err := DecodeBatch(b.AppendMsg(nil))
		if err != nil {
			t.Fatalf("re-encoded batch rejected: %v", err)
		}
		if again.Isolate != b.Isolate || again.Seq != b.Seq || again.At != b.At || len(again.Entries) != len(b.Entries) {
			t.Fatalf("round trip changed the batch: %+v vs %+v", b, again)
		}
		for i := range b.Entries {
			if b.Entries[i] != again.Entries[i] {
				t.Fatalf("entry %d changed", i)
			}
		}
		if err := m.Check(b); err != nil {
			var fe *wire.FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("check error without a field: %v", err)
			}
		}
	})
}
