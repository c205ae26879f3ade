package wire_test

import (
	"bytes"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Every integer width boundary round-trips through AppendInt/ReadInt, in
// the smallest form for its sign and size, and msgpack/v5 reads the same
// value back.
func TestIntBoundaries(t *testing.T) {
	cases := []struct {
		v    int64
		size int  // encoded bytes
		code byte // first byte (for fixints, the value itself)
	}{
		{0, 1, 0x00},
		{1, 1, 0x01},
		{127, 1, 0x7f},
		{128, 2, 0xcc},
		{255, 2, 0xcc},
		{256, 3, 0xd1},
		{math.MaxInt16, 3, 0xd1},
		{math.MaxInt16 + 1, 3, 0xcd},
		{math.MaxUint16, 3, 0xcd},
		{math.MaxUint16 + 1, 5, 0xd2},
		{math.MaxInt32, 5, 0xd2},
		{math.MaxInt32 + 1, 5, 0xce},
		{math.MaxUint32, 5, 0xce},
		{math.MaxUint32 + 1, 9, 0xd3},
		{wire.MaxLimit, 9, 0xd3},
		{math.MaxInt64 - 1, 9, 0xd3},
		{math.MaxInt64, 9, 0xd3},
		{-1, 1, 0xff},
		{-32, 1, 0xe0},
		{-33, 2, 0xd0},
		{math.MinInt8, 2, 0xd0},
		{math.MinInt8 - 1, 3, 0xd1},
		{math.MinInt16, 3, 0xd1},
		{math.MinInt16 - 1, 5, 0xd2},
		{math.MinInt32, 5, 0xd2},
		{math.MinInt32 - 1, 9, 0xd3},
		{math.MinInt64 + 1, 9, 0xd3},
		{math.MinInt64, 9, 0xd3},
	}
	for _, tc := range cases {
		b := wire.AppendInt([]byte{0xaa}, tc.v)
		if b[0] != 0xaa {
			t.Fatalf("AppendInt(%d) overwrote the prefix", tc.v)
		}
		b = b[1:]
		if len(b) != tc.size || b[0] != tc.code {
			t.Errorf("AppendInt(%d) = % x, want %d bytes starting 0x%02x", tc.v, b, tc.size, tc.code)
		}
		r := wire.NewReader(b)
		if got := r.ReadInt(); got != tc.v || r.Done() != nil {
			t.Errorf("ReadInt(AppendInt(%d)) = %d, err %v", tc.v, got, r.Err())
		}
		var m int64
		if err := msgpack.Unmarshal(b, &m); err != nil || m != tc.v {
			t.Errorf("msgpack/v5 reads AppendInt(%d) as %d, %v", tc.v, m, err)
		}
		// Every form msgpack/v5 writes for the value reads back.
		var forms [][]byte
		enc := func(f func(*msgpack.Encoder) error) {
			var buf bytes.Buffer
			if err := f(msgpack.NewEncoder(&buf)); err != nil {
				t.Fatal(err)
			}
			forms = append(forms, buf.Bytes())
		}
		enc(func(e *msgpack.Encoder) error { return e.EncodeInt(tc.v) })
		enc(func(e *msgpack.Encoder) error { return e.EncodeInt64(tc.v) })
		if tc.v >= 0 {
			enc(func(e *msgpack.Encoder) error { return e.EncodeUint(uint64(tc.v)) })
			enc(func(e *msgpack.Encoder) error { return e.EncodeUint64(uint64(tc.v)) })
		}
		if tc.v >= math.MinInt32 && tc.v <= math.MaxInt32 {
			enc(func(e *msgpack.Encoder) error { return e.EncodeInt32(int32(tc.v)) })
		}
		if tc.v >= 0 && tc.v <= math.MaxUint32 {
			enc(func(e *msgpack.Encoder) error { return e.EncodeUint32(uint32(tc.v)) })
		}
		if tc.v >= math.MinInt16 && tc.v <= math.MaxInt16 {
			enc(func(e *msgpack.Encoder) error { return e.EncodeInt16(int16(tc.v)) })
		}
		if tc.v >= 0 && tc.v <= math.MaxUint16 {
			enc(func(e *msgpack.Encoder) error { return e.EncodeUint16(uint16(tc.v)) })
		}
		if tc.v >= math.MinInt8 && tc.v <= math.MaxInt8 {
			enc(func(e *msgpack.Encoder) error { return e.EncodeInt8(int8(tc.v)) })
		}
		if tc.v >= 0 && tc.v <= math.MaxUint8 {
			enc(func(e *msgpack.Encoder) error { return e.EncodeUint8(uint8(tc.v)) })
		}
		for _, f := range forms {
			r := wire.NewReader(f)
			if got := r.ReadInt(); got != tc.v || r.Done() != nil {
				t.Errorf("ReadInt(% x) = %d, err %v; want %d", f, got, r.Err(), tc.v)
			}
		}
	}
}

func TestReadIntRejects(t *testing.T) {
	for _, b := range [][]byte{
		{0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0}, // uint64 above MaxInt64
		{0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0xd3, 0, 0},                   // short
		{0xcd, 1},                      // short
		{0xc0},                         // nil
		{0xa1, '1'},                    // string
		{0xcb, 0, 0, 0, 0, 0, 0, 0, 0}, // float64
		{},                             // nothing
	} {
		r := wire.NewReader(b)
		if got := r.ReadInt(); got != 0 || r.Err() == nil {
			t.Errorf("ReadInt(% x) = %d, err %v; want an error", b, got, r.Err())
		}
		// The first error sticks.
		if r.ReadInt() != 0 || r.ReadString() != "" || r.ReadBool() || r.Err() == nil {
			t.Errorf("after an error on % x, reads must return zero values", b)
		}
	}
	r := wire.NewReader([]byte{0xd3, 0})
	r.ReadInt()
	if !errors.Is(r.Err(), wire.ErrShort) {
		t.Errorf("a truncated int64: %v, want ErrShort", r.Err())
	}
}

func TestStringLengthClasses(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 255, 256, 65535, 65536} {
		s := strings.Repeat("s", n)
		b := wire.AppendString(nil, s)
		var wantHead int
		switch {
		case n < 32:
			wantHead = 1
		case n <= 255:
			wantHead = 2
		case n <= 65535:
			wantHead = 3
		default:
			wantHead = 5
		}
		if len(b) != wantHead+n {
			t.Errorf("AppendString(%d bytes): header %d bytes, want %d", n, len(b)-n, wantHead)
		}
		r := wire.NewReader(b)
		if got := r.ReadString(); got != s || r.Done() != nil {
			t.Errorf("ReadString of %d bytes: %d bytes, %v", n, len(got), r.Err())
		}
		var m string
		if err := msgpack.Unmarshal(b, &m); err != nil || m != s {
			t.Errorf("msgpack/v5 reads a %d-byte string: %v", n, err)
		}
		var buf bytes.Buffer
		if err := msgpack.NewEncoder(&buf).EncodeString(s); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), b) {
			t.Errorf("%d-byte string: ours % x..., msgpack/v5 % x...", n, b[:min(len(b), 6)], buf.Bytes()[:min(buf.Len(), 6)])
		}
	}
	// bin is accepted as a string.
	r := wire.NewReader([]byte{0xc4, 2, 'h', 'i'})
	if got := r.ReadString(); got != "hi" || r.Done() != nil {
		t.Errorf("bin8 as a string: %q %v", got, r.Err())
	}
	// A length beyond the input is ErrShort, not a huge allocation.
	r = wire.NewReader([]byte{0xdb, 0xff, 0xff, 0xff, 0xff, 'x'})
	if r.ReadString() != "" || !errors.Is(r.Err(), wire.ErrShort) {
		t.Errorf("str32 of 4 GiB in 6 bytes: %v", r.Err())
	}
}

func TestHeadersAndScalars(t *testing.T) {
	for _, n := range []int{0, 15, 16, 65535, 65536} {
		var b []byte
		b = wire.AppendMapHeader(b, n)
		b = wire.AppendArrayHeader(b, n)
		// Pad so that 32-bit lengths pass the "fits in the input" check.
		b = append(b, make([]byte, 2*n)...)
		r := wire.NewReader(b)
		if m, a := r.ReadMapHeader(), r.ReadArrayHeader(); m != n || a != n || r.Err() != nil {
			t.Errorf("headers of %d: map %d array %d err %v", n, m, a, r.Err())
		}
	}
	// 32-bit headers longer than the input are refused.
	for _, b := range [][]byte{{0xdf, 0, 1, 0, 0}, {0xdd, 0xff, 0, 0, 0}} {
		r := wire.NewReader(b)
		r.ReadMapHeader()
		r2 := wire.NewReader(b)
		r2.ReadArrayHeader()
		if r.Err() == nil && r2.Err() == nil {
			t.Errorf("header % x accepted", b)
		}
	}
	b := wire.AppendBool(nil, true)
	b = wire.AppendBool(b, false)
	r := wire.NewReader(b)
	if !r.ReadBool() || r.ReadBool() || r.Done() != nil {
		t.Errorf("scalars: %v", r.Err())
	}
	if r := wire.NewReader([]byte{0x01}); r.ReadBool() || r.Err() == nil {
		t.Error("1 read as a bool")
	}
	r = wire.NewReader([]byte{0x01, 0x02})
	r.ReadInt()
	if err := r.Done(); err == nil || !strings.Contains(err.Error(), "1 trailing") {
		t.Errorf("Done with a byte left: %v", err)
	}
	r.Reset([]byte{0x05})
	if r.ReadInt() != 5 || r.Done() != nil {
		t.Error("Reset did not clear the error")
	}
}

func TestSkip(t *testing.T) {
	// Every type msgpack/v5 writes can be skipped.
	values := []any{nil, true, false, 1, -1, 200, -200, 70000, -70000, int64(1) << 40, uint64(math.MaxUint64),
		float32(1.5), 2.5, "s", strings.Repeat("x", 40), strings.Repeat("x", 300), []byte{1, 2, 3},
		make([]byte, 300), []any{1, "a", []any{}}, make([]any, 20), map[string]any{"a": map[string]any{"b": 1}},
		msgpack.RawMessage{0xd4, 1, 2}, msgpack.RawMessage{0xd5, 1, 2, 3}, msgpack.RawMessage{0xd7, 1, 1, 2, 3, 4, 5, 6, 7, 8},
		msgpack.RawMessage{0xd8, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, msgpack.RawMessage{0xc7, 2, 1, 1, 2},
		msgpack.RawMessage{0xc8, 0, 2, 1, 1, 2}, msgpack.RawMessage{0xc9, 0, 0, 0, 2, 1, 1, 2}, msgpack.RawMessage{0xc6, 0, 0, 0, 1, 9},
		msgpack.RawMessage{0xdb, 0, 0, 0, 1, 'z'}, msgpack.RawMessage{0xc5, 0, 1, 9}}
	for _, v := range values {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		r := wire.NewReader(append(b, 0x07))
		r.Skip()
		if r.ReadInt() != 7 || r.Done() != nil {
			t.Errorf("Skip(%T % x): %v", v, b[:min(len(b), 8)], r.Err())
		}
	}
	// Nesting is bounded.
	deep := append(bytes.Repeat([]byte{0x91}, 100), 0x01)
	r := wire.NewReader(deep)
	r.Skip()
	if r.Err() == nil || !strings.Contains(r.Err().Error(), "nested") {
		t.Errorf("100 nested arrays: %v", r.Err())
	}
	// A reserved type byte is an error.
	r = wire.NewReader([]byte{0xc1})
	r.Skip()
	if r.Err() == nil {
		t.Error("0xc1 skipped")
	}
}

// TestDeclaredLengthsAllocateLittle: a batch whose 16-bit array header
// declares 8,192 entries, signals, denials or asks that the body does not
// hold is refused (ErrShort) without allocating them (it allocated 384-576
// KiB per body of 6 or 7 bytes); a body that holds them still decodes.
func TestDeclaredLengthsAllocateLittle(t *testing.T) {
	for _, f := range []string{"e", "up", "dn", "ak"} {
		body := append(wire.AppendMapHeader(nil, 1), wire.AppendString(nil, f)...)
		body = wire.AppendArrayHeader(body, wire.MaxBatchEntries)
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		var b wire.Batch
		err := b.UnmarshalMsg(body)
		runtime.ReadMemStats(&ms1)
		if !errors.Is(err, wire.ErrShort) {
			t.Errorf("%s: %v, want wire.ErrShort", f, err)
		}
		if n := ms1.TotalAlloc - ms0.TotalAlloc; n > 16<<10 {
			t.Errorf("%s: a %d-byte body allocated %d bytes", f, len(body), n)
		}
	}
	full := wire.Batch{Version: wire.Version, Isolate: "i", Seq: 1, Entries: make([]wire.Delta, wire.MaxBatchEntries)}
	for i := range full.Entries {
		full.Entries[i] = wire.Delta{Limiter: "l", Key: "k"}
	}
	var b wire.Batch
	if err := b.UnmarshalMsg(full.AppendMsg(nil)); err != nil || len(b.Entries) != wire.MaxBatchEntries {
		t.Fatalf("a batch of %d entries: %v, %d entries", wire.MaxBatchEntries, err, len(b.Entries))
	}
}
