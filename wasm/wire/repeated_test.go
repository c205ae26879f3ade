package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestBatchFieldGivenTwice: a batch that gives a field twice is refused
// naming it. Decoded as they came, the last copy replaced the first: a
// batch with its entries twice was answered 200 and half of them lost.
// Every field of a batch encoded as the module does, repeated, is refused;
// the batch itself decodes.
func TestBatchFieldGivenTwice(t *testing.T) {
	good := map[string]any{"v": wire.Version, "iso": "i", "sec": "", "pv": "h", "pvs": "0123456789abcdef", "seq": 1, "at": 5,
		"e": [][]any{{"api", "k", 7, 3, 3}}, "up": []any{}, "dn": []any{}, "ak": []any{},
		"end": false, "rg": 0, "lim": false, "sp": false, "pc": false}
	names := make([]string, 0, len(good))
	for k := range good {
		names = append(names, k)
	}
	enc := func(dup string) []byte {
		n := len(names)
		if dup != "" {
			n++
		}
		b := wire.AppendMapHeader(nil, n)
		for _, k := range append(names, dup) {
			if k == "" {
				continue
			}
			v, err := msgpack.Marshal(good[k])
			if err != nil {
				t.Fatal(err)
			}
			b = append(wire.AppendString(b, k), v...)
		}
		return b
	}
	var b wire.Batch
	if err := b.UnmarshalMsg(enc("")); err != nil || len(b.Entries) != 1 {
		t.Fatalf("the batch once: %v, %d entries", err, len(b.Entries))
	}
	for _, k := range names {
		err := b.UnmarshalMsg(enc(k))
		var fe *wire.FieldError
		if !errors.As(err, &fe) || fe.Field != k || !strings.Contains(err.Error(), "given twice") {
			t.Errorf("%q given twice: %v; want a field error naming it", k, err)
		}
	}
}
