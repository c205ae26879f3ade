package coordinator

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestRedisDuplicateConfirmsMark: a batch whose records were written and
// confirmed, but whose isolate's high-water mark (on another master) was
// not (WAIT not met there: 503), is resent; that duplicate is answered
// only once the mark is confirmed. Answered from what it read, as before,
// the mark was lost with its master (kill -9 after its replicas fell
// behind), and the isolate's next batch was refused as a gap (409: a new
// incarnation for nothing).
func TestRedisDuplicateConfirmsMark(t *testing.T) {
	ctx, cl, rs, c, clk := waitingCluster(t)
	w := clk.now() / sec
	// An isolate whose mark lives on a master other than its key's.
	keyMaster := masterOf(ctx, t, rs, []byte(merge.KeyStorageKey("fw", "k")))
	iso := ""
	for i := 0; iso == ""; i++ {
		if id := fmt.Sprintf("iso-%d", i); masterOf(ctx, t, rs, []byte(merge.HWMStorageKey(id))) != keyMaster {
			iso = id
		}
	}
	markMaster := masterOf(ctx, t, rs, []byte(merge.HWMStorageKey(iso)))
	replicas := cl.ReplicasOf(ctx, markMaster)
	b := func(seq int64) *wire.Batch {
		return batch(iso, seq, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: w, Delta: 1, Demand: 1})
	}
	mustSync(t, c, b(1))
	resume := freezeReplicas(ctx, t, cl, markMaster, replicas)
	defer resume()
	if _, err := c.Sync(ctx, b(2)); err == nil {
		t.Fatal("batch 2 answered with its mark's master's replicas behind, want an error")
	}
	answered := false
	if _, err := c.Sync(ctx, b(2)); err == nil {
		answered = true
		t.Error("batch 2 resent (a duplicate) was answered with its mark unconfirmed")
	}
	killAndPromote(ctx, t, cl, markMaster, replicas, resume)
	// The isolate sends batch 2 again until it is answered, then batch 3.
	send := func(bt *wire.Batch) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, err := c.Sync(context.Background(), bt)
			if err == nil {
				return
			}
			if errors.Is(err, merge.ErrSequence) {
				t.Fatalf("batch %d after the failover: %v (the mark of batch 2 was lost)", bt.Seq, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("batch %d: no answer within 20 s: %v", bt.Seq, err)
			}
		}
	}
	if !answered {
		send(b(2))
	}
	send(b(3))
	if got := getKey(t, c, "fw", "k").Count; got != 3 {
		t.Errorf("count %d after 3 batches of 1, want 3", got)
	}
}
