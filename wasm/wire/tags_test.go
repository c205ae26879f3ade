package wire_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The msgpack struct tags let a Go host that uses any Extism SDK encode and
// decode the wire types with msgpack/v5 instead of AppendMsg/UnmarshalMsg.
// These tests check both directions on every message: msgpack/v5 Marshal of
// a tagged struct is read back by our decoder as the same value, our
// AppendMsg bytes are read by msgpack/v5 Unmarshal as the same value, and,
// where the field order and integer widths agree, the bytes are equal.

// marshalV5 encodes v with msgpack/v5, integers in their compact form.
func marshalV5(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("msgpack/v5 encode %T: %v", v, err)
	}
	return buf.Bytes()
}

func TestTagsMsgpackV5RoundTrip(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			// msgpack/v5 Marshal of the tagged struct -> our decoder.
			b := marshalV5(t, c.value)
			got := c.fresh()
			if err := got.UnmarshalMsg(b); err != nil {
				t.Fatalf("our decoder refuses msgpack/v5's bytes %x: %v", b, err)
			}
			if !reflect.DeepEqual(emptyAsNil(got), emptyAsNil(c.value)) {
				t.Fatalf("msgpack/v5 -> UnmarshalMsg:\n got %+v\nwant %+v", got, c.value)
			}
			// Our AppendMsg -> msgpack/v5 Unmarshal into the tagged struct.
			back := reflect.New(reflect.TypeOf(c.value).Elem()).Interface()
			if err := msgpack.Unmarshal(c.value.AppendMsg(nil), back); err != nil {
				t.Fatalf("msgpack/v5 refuses AppendMsg's bytes: %v", err)
			}
			if !reflect.DeepEqual(emptyAsNil(back), emptyAsNil(c.value)) {
				t.Fatalf("AppendMsg -> msgpack/v5:\n got %+v\nwant %+v", back, c.value)
			}
		})
	}
}

// emptyAsNil maps the empty slices msgpack/v5 may decode as nil (or not) to
// nil, so values compare by content.
func emptyAsNil(v any) any {
	switch x := v.(type) {
	case *wire.Config:
		c := *x
		c.Limiters = append([]wire.LimiterConfig(nil), c.Limiters...)
		for i := range c.Limiters {
			if len(c.Limiters[i].Overrides) == 0 {
				c.Limiters[i].Overrides = nil
			}
		}
		return c
	}
	return v
}

// TestTagsSameBytes: where the integers are ones msgpack/v5 and AppendInt
// write alike (-2^63..255: AppendInt prefers the signed forms above that,
// msgpack/v5's compact form the unsigned ones; both read either), as with
// the simulator's virtual times, msgpack/v5 gives AppendMsg's bytes exactly:
// same field names, same order, same array layouts.
func TestTagsSameBytes(t *testing.T) {
	batch := wire.Batch{Version: wire.Version, Isolate: "edge-1", Seq: 7, At: 250, Entries: []wire.Delta{
		{Limiter: "llm", Key: "user-1", Window: 2, Delta: 3, Demand: 200},
		{Limiter: "bucket", Key: "k", Window: 0, Delta: 0, Demand: 1},
	}}
	reply := wire.Reply{Version: wire.Version, Seq: 7, At: 251, Entries: []wire.View{
		{Limiter: "llm", Key: "user-1", Window: 2, Count: 6, Prev: 127, TAT: 0, Lease: -1, Isolates: 3},
		{Limiter: "s", Key: "k", Window: 2, Count: 255, Prev: -100, TAT: 9, Lease: 40, Isolates: 128},
	}}
	req := wire.DecideRequest{Version: wire.Version, Now: 99, Checks: []wire.Check{{Limiter: "llm", Key: "u", Cost: 1}, {Limiter: "b", Key: "v", Cost: 0}}}
	stats := wire.Stats{Keys: 100, Decisions: 250, Denials: 5, StateBytes: 200, Errors: 1}
	for name, v := range map[string]interface{ AppendMsg([]byte) []byte }{
		"batch": &batch, "reply": &reply, "decide_request": &req, "stats": &stats,
	} {
		if got, want := marshalV5(t, v), v.AppendMsg(nil); !bytes.Equal(got, want) {
			t.Errorf("%s: msgpack/v5 %x\n      AppendMsg %x", name, got, want)
		}
	}
}

// TestTagsNilSlices: msgpack/v5 writes a nil slice as nil, which our
// decoder does not take for an array; the omitempty tags leave such fields
// out, which decodes as none.
func TestTagsNilSlices(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{{Name: "a", Algorithm: wire.FixedWindow, Limit: 1, Period: 1e9}}}
	var got wire.Config
	if err := got.UnmarshalMsg(marshalV5(t, &cfg)); err != nil {
		t.Fatalf("config without overrides: %v", err)
	}
	var b wire.Batch
	if err := b.UnmarshalMsg(marshalV5(t, &wire.Batch{Version: wire.Version, Isolate: "i", Seq: 1})); err != nil || len(b.Entries) != 0 {
		t.Fatalf("empty batch: %v %+v", err, b)
	}
	var q wire.DecideRequest
	if err := q.UnmarshalMsg(marshalV5(t, &wire.DecideRequest{Version: wire.Version})); err == nil {
		t.Fatal("a decide request without checks was accepted")
	}
}
