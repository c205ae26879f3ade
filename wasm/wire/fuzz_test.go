package wire_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The fuzz targets (run by `make fuzz`) feed arbitrary bytes to every
// decoder. Property: no panic, and when decoding succeeds, encoding the
// value and decoding it again gives the same value and the same bytes.

func fuzzRoundTrip[T any, P interface {
	*T
	AppendMsg([]byte) []byte
	UnmarshalMsg([]byte) error
}](t *testing.T, data []byte, normalize func(*T)) {
	var v1 T
	if err := P(&v1).UnmarshalMsg(data); err != nil {
		return
	}
	enc1 := P(&v1).AppendMsg(nil)
	var v2 T
	if err := P(&v2).UnmarshalMsg(enc1); err != nil {
		t.Fatalf("re-encoded value does not decode: %v\nvalue %+v", err, v1)
	}
	normalize(&v1)
	normalize(&v2)
	if !reflect.DeepEqual(v1, v2) {
		t.Fatalf("round trip changed the value:\n%+v\n%+v", v1, v2)
	}
	if enc2 := P(&v2).AppendMsg(nil); !bytes.Equal(enc1, enc2) {
		t.Fatalf("encoding is not stable:\n% x\n% x", enc1, enc2)
	}
}

func seeds(f *testing.F, msgs ...interface{ AppendMsg([]byte) []byte }) {
	for _, m := range msgs {
		b := m.AppendMsg(nil)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{0x80})
	f.Add([]byte{0xc1})
}

func FuzzConfig(f *testing.F) {
	seeds(f, &fixConfig, &wire.Config{Version: 1, Limiters: []wire.LimiterConfig{{Name: "a", Algorithm: wire.GCRA, Limit: 1, Period: wire.MinPeriod}}})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(c *wire.Config) {
			for i := range c.Limiters {
				if len(c.Limiters[i].Overrides) == 0 {
					c.Limiters[i].Overrides = nil
				}
			}
		})
		// What decodes is valid.
		var c wire.Config
		if c.UnmarshalMsg(data) == nil {
			if err := c.Validate(); err != nil {
				t.Fatalf("decoded an invalid config: %v", err)
			}
		}
	})
}

func FuzzBatch(f *testing.F) {
	seeds(f, &fixBatch, &fixBatchSignals, &fixBatchDenials, &wire.Batch{Version: 1, Isolate: "i", Seq: 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(b *wire.Batch) {
			if len(b.Entries) == 0 {
				b.Entries = nil
			}
			if len(b.Signals) == 0 {
				b.Signals = nil
			}
		})
		var b wire.Batch
		if b.UnmarshalMsg(data) == nil {
			if err := b.Validate(); err != nil || len(b.Entries) > wire.MaxBatchEntries {
				t.Fatalf("decoded an invalid batch: %v", err)
			}
		}
	})
}

func FuzzReply(f *testing.F) {
	seeds(f, &fixReply, &fixReplyUpstream, &wire.Reply{Version: 1, Seq: 1},
		&wire.Reply{Version: 1, Seq: 1, ResetGen: 7, Resets: []wire.ResetKey{{Limiter: "a", Key: "k"}}},
		&wire.Reply{Version: 1, Seq: 1, Entries: []wire.View{{Limiter: "a", Key: "k", Lease: 2, Held: 1, StandTo: 9, Pace: 40}}})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(rp *wire.Reply) {
			if len(rp.Upstream) == 0 {
				rp.Upstream = nil
			}
			if len(rp.Resets) == 0 {
				rp.Resets = nil
			}
		})
		var rp wire.Reply
		if rp.UnmarshalMsg(data) == nil {
			if rp.Version != wire.Version || len(rp.Entries) > wire.MaxBatchEntries {
				t.Fatalf("decoded a bad reply: %+v", rp)
			}
			for _, v := range rp.Entries {
				if len(v.Key) == 0 || len(v.Key) > wire.MaxKeyLen {
					t.Fatalf("decoded a key of %d bytes", len(v.Key))
				}
			}
		}
	})
}

func FuzzObservation(f *testing.F) {
	seeds(f, &fixObservation, &wire.Observation{Version: 1, Limiter: "a", Key: "k", Status: 503})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(o *wire.Observation) {
			if len(o.Headers) == 0 {
				o.Headers = nil
			}
		})
		var o wire.Observation
		if o.UnmarshalMsg(data) == nil && (len(o.Headers) > wire.MaxHeaders || o.Status < 0 || o.Status > 999) {
			t.Fatalf("decoded a bad observation: %+v", o)
		}
	})
}

func FuzzDecideRequest(f *testing.F) {
	seeds(f, &fixDecideRequest, &wire.DecideRequest{Version: 1, Checks: []wire.Check{{Limiter: "a", Key: "k"}}})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(*wire.DecideRequest) {})
		var q wire.DecideRequest
		if q.UnmarshalMsg(data) == nil && (len(q.Checks) < 1 || len(q.Checks) > wire.MaxChecks) {
			t.Fatalf("decoded %d checks", len(q.Checks))
		}
	})
}
