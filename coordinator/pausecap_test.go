package coordinator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestPausedReplyWithinUpstreamBound: a batch of 6,000 entries of a
// limiter paused fleet-wide and 3,000 signals of other keys is answered
// with at most wire.MaxBatchEntries upstream views (the module refuses a
// reply with more, and its resent batch would get the same one while the
// pause lasts), every entry's pause among them. Without capUpstream the
// reply held 9,000.
func TestPausedReplyWithinUpstreamBound(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, func(o *Options) { o.Config = upstreamConfig() })
	if err := c.PauseFleet(context.Background(), "test", "fw", "", time.Hour, "test"); err != nil {
		t.Fatal(err)
	}
	const entries, signals = 6000, 3000
	b := batch("x", 1, clk.now())
	for i := range entries {
		b.Entries = append(b.Entries, wire.Delta{Limiter: "fw", Key: fmt.Sprintf("k%d", i), Window: clk.now() / sec, Delta: 1})
	}
	for i := range signals {
		b.Signals = append(b.Signals, wire.Signal{Limiter: "up", Key: fmt.Sprintf("u%d", i), Pause: int64(time.Second)})
	}
	rp := mustSync(t, c, b)
	var back wire.Reply
	if err := back.UnmarshalMsg(rp.AppendMsg(nil)); err != nil {
		t.Fatalf("the reply (%d upstream views) does not decode: %v", len(rp.Upstream), err)
	}
	if len(back.Upstream) > wire.MaxBatchEntries {
		t.Fatalf("%d upstream views, more than %d", len(back.Upstream), wire.MaxBatchEntries)
	}
	paused := 0
	for _, u := range back.Upstream {
		if u.Limiter == "fw" && u.Pause > 0 {
			paused++
		}
	}
	if paused != entries {
		t.Errorf("%d of the %d paused entries told their pause", paused, entries)
	}
}
