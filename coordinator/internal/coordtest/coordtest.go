// Package coordtest holds the test helpers the coordinator's packages
// share: the limiters of their tests, building sync batches, syncing them
// and finding a key's view in a reply.
package coordtest

import (
	"context"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Sec is a second in ns.
const Sec = int64(time.Second)

// T0 is a test start time: window 1000 of a 1 s period.
const T0 = 1000 * Sec

// Config has one limiter of each kind: fw (fixed window 100/s, override
// vip 1000), sw (sliding 100/s), tb (token bucket 10/s, burst 20), gcra
// (1000/s), and the strict sfw, ssw (100/s) and stb (50/s, burst 100).
func Config() wire.Config {
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "fw", Algorithm: wire.FixedWindow, Limit: 100, Period: Sec,
			Overrides: []wire.Override{{Key: "vip", Limit: 1000}}},
		{Name: "sw", Algorithm: wire.SlidingWindow, Limit: 100, Period: Sec},
		{Name: "tb", Algorithm: wire.TokenBucket, Limit: 10, Period: Sec, Burst: 20},
		{Name: "gcra", Algorithm: wire.GCRA, Limit: 1000, Period: Sec},
		{Name: "sfw", Algorithm: wire.FixedWindow, Limit: 100, Period: Sec, Mode: wire.Strict},
		{Name: "ssw", Algorithm: wire.SlidingWindow, Limit: 100, Period: Sec, Mode: wire.Strict},
		{Name: "stb", Algorithm: wire.TokenBucket, Limit: 50, Period: Sec, Burst: 100, Mode: wire.Strict},
	}}
}

// Syncer applies a sync batch: the coordinator, or a test's harness around
// the merge core.
type Syncer interface {
	Sync(ctx context.Context, b *wire.Batch) (*wire.Reply, error)
}

// Batch returns batch seq of isolate iso, cut at at (ns), with entries.
func Batch(iso string, seq, at int64, entries ...wire.Delta) *wire.Batch {
	return &wire.Batch{Version: wire.Version, Isolate: iso, Seq: seq, At: at, Entries: entries}
}

// Amend returns b resent as an amendment with asks (wire.Batch.Asks).
func Amend(b *wire.Batch, asks ...wire.Ask) *wire.Batch {
	a := *b
	a.Asks = asks
	return &a
}

// MustSync applies b through s and fails t on an error.
func MustSync(t testing.TB, s Syncer, b *wire.Batch) *wire.Reply {
	t.Helper()
	rp, err := s.Sync(context.Background(), b)
	if err != nil {
		t.Fatalf("sync %s/%d: %v", b.Isolate, b.Seq, err)
	}
	return rp
}

// ViewOf returns the view of (limiter, key) in rp and fails t without one.
func ViewOf(t testing.TB, rp *wire.Reply, limiter, key string) wire.View {
	t.Helper()
	v, ok := FindView(rp, limiter, key)
	if !ok {
		t.Fatalf("no view for %s/%s in %+v", limiter, key, rp.Entries)
	}
	return v
}

// FindView returns the view of (limiter, key) in rp, and whether rp has
// one (for a test's goroutines, which must not stop the test).
func FindView(rp *wire.Reply, limiter, key string) (wire.View, bool) {
	for _, v := range rp.Entries {
		if v.Limiter == limiter && v.Key == key {
			return v, true
		}
	}
	return wire.View{}, false
}
