package merge

import (
	"errors"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// FuzzHostileBatch applies an arbitrary batch (any bytes the decoder
// accepts, as another isolate's) between two batches of an honest isolate
// and checks what no batch may do to another isolate: panic the Merger,
// make the honest isolate's counts disappear, or refuse its next batch.
// A refused hostile batch is a *wire.FieldError or a *SeqError.
func FuzzHostileBatch(f *testing.F) {
	w := t0 / sec
	add := func(b *wire.Batch) { f.Add(b.AppendMsg(nil)) }
	add(&wire.Batch{Version: wire.Version, Isolate: "x", Seq: 1, At: t0,
		Entries: []wire.Delta{{Limiter: "fw", Key: "k", Window: w + 1, Delta: 1}}})
	add(&wire.Batch{Version: wire.Version, Isolate: "x", Seq: 1, At: t0, End: true, ResetGen: 1 << 62,
		Entries: []wire.Delta{{Limiter: "sfw", Key: "k", Window: w, Delta: wire.MaxLimit, Demand: wire.MaxLimit}},
		Asks:    []wire.Ask{{Limiter: "ssw", Key: "k", Window: 1 << 40, Cost: wire.MaxLimit}}})
	add(&wire.Batch{Version: wire.Version, Isolate: "h", Seq: 2, At: -1 << 62,
		Entries: []wire.Delta{{Limiter: "tb", Key: "k", Window: 1 << 62, Delta: 7, Demand: 9}},
		Signals: []wire.Signal{{Limiter: "tb", Key: "k", Pause: wire.MaxPeriod * 12, Limit: 1}}})
	f.Fuzz(func(t *testing.T, body []byte) {
		var b wire.Batch
		if b.UnmarshalMsg(body) != nil {
			return
		}
		m, err := NewMerger(testConfig(), newMemStore(), MergerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		now := t0 + sec/2
		honest := func(seq, d int64) {
			t.Helper()
			hb := &wire.Batch{Version: wire.Version, Isolate: "h", Secret: "0123456789abcdef", Seq: seq, At: now,
				Entries: []wire.Delta{{Limiter: "fw", Key: "k", Window: w, Delta: d}, {Limiter: "sfw", Key: "k", Window: w, Delta: d, Demand: d}}}
			if _, err := m.Apply(hb, now); err != nil {
				t.Fatalf("honest batch %d: %v", seq, err)
			}
			if err := m.Commit(now); err != nil {
				t.Fatal(err)
			}
		}
		honest(1, 5)
		if b.Isolate == "h" {
			b.Secret = "" // a client that knows the id and not its secret
		}
		if _, err := m.Apply(&b, now); err != nil {
			var fe *wire.FieldError
			var se *SeqError
			if !errors.As(err, &fe) && !errors.As(err, &se) {
				t.Fatalf("hostile batch refused with %T %v, want a field or sequence error", err, err)
			}
		}
		if err := m.Commit(now); err != nil {
			t.Fatal(err)
		}
		honest(2, 1)
		for _, lim := range []string{"fw", "sfw"} {
			ks, err := m.KeyState(lim, "k", now)
			if err != nil {
				t.Fatal(err)
			}
			got := ks.Count
			if ks.Window == w+1 {
				got = ks.Prev
			}
			if ks.Window < w || ks.Window > w+1 || got < 6 {
				t.Fatalf("%s/k after a hostile batch: window %d count %d prev %d, want window %d or %d holding the honest 6",
					lim, ks.Window, ks.Count, ks.Prev, w, w+1)
			}
		}
	})
}
