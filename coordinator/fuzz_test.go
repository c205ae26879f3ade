package coordinator

import (
	"errors"
	"fmt"
	"testing"

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
	m, err := NewMerger(testConfig(), nil, MergerOptions{})
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

// FuzzWalkLog runs the log record decoder (what a restart reads back) on
// arbitrary bytes: it must never panic, and the ops of every record it
// accepts must re-encode to a record with the same ops.
func FuzzWalkLog(f *testing.F) {
	set, _ := appendLogSet(nil, "kfwk", []byte{1, 2, 3})
	f.Add(appendLogDelete(set, []byte("hiso")))
	f.Add([]byte{'s', 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{'d'})
	read := func(rec []byte) ([]string, []byte, error) {
		var ops []string
		var out []byte
		err := walkLog(rec, func(k, v []byte, del bool) {
			ops = append(ops, fmt.Sprintf("%q %q %v", k, v, del))
			if del {
				out = appendLogDelete(out, k)
			} else {
				out, _ = appendLogSet(out, k, v)
			}
		})
		return ops, out, err
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		ops, out, err := read(rec)
		if err != nil {
			return
		}
		again, _, err := read(out)
		if err != nil || fmt.Sprint(again) != fmt.Sprint(ops) {
			t.Fatalf("ops %v re-read as %v (%v)", ops, again, err)
		}
	})
}
