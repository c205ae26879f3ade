// Package coordtest holds the test helpers the coordinator's packages
// share: building sync batches, syncing them and finding a key's view in a
// reply.
package coordtest

import (
	"context"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Syncer applies a sync batch: the coordinator, or a test's harness around
// the merge core.
type Syncer interface {
	Sync(ctx context.Context, b *wire.Batch) (*wire.Reply, error)
}

// Batch returns batch seq of isolate iso, cut at at (ns), with entries.
func Batch(iso string, seq, at int64, entries ...wire.Delta) *wire.Batch {
	return &wire.Batch{Version: wire.Version, Isolate: iso, Seq: seq, At: at, Entries: entries}
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
	for _, v := range rp.Entries {
		if v.Limiter == limiter && v.Key == key {
			return v
		}
	}
	t.Fatalf("no view for %s/%s in %+v", limiter, key, rp.Entries)
	return wire.View{}
}
