package host

import (
	"context"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/syncloop"
)

// The sync loop takes a batch refused for its times back
// (lockedModule.Recall) while a held request amends it (slot.amend), a
// decision holding the isolate's lock meanwhile: both return. A first
// version took the isolate's lock before amendMu, slot.amend the other
// way round, and the slot deadlocked for good (its loop, its decisions
// and Close).
func TestRecallAndAmendTakeLocksInOneOrder(t *testing.T) {
	cfg := retimeCfg()
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", cfg, nil)
	defer k.stop(t)
	h := serve(t, Options{Config: cfg, Isolates: 1, Coordinator: "http://" + k.addr,
		Sync: syncloop.Options{Interval: 20 * time.Second}})
	s := h.h.slots[0]
	s.attemptAt.Store(1) // the refused batch's attempt is still on (the loop recalls before it ends it)
	s.mu.Lock()          // a decision in progress
	recalled := make(chan struct{})
	go func() {
		lockedModule{s}.Recall(context.Background(), time.Now().UnixNano())
		close(recalled)
	}()
	time.Sleep(50 * time.Millisecond) // Recall waits for a lock
	amended := make(chan struct{})
	go func() {
		s.amend(time.Now().UnixNano())
		close(amended)
	}()
	time.Sleep(50 * time.Millisecond) // so does amend
	s.mu.Unlock()
	for what, ch := range map[string]chan struct{}{"Recall": recalled, "amend": amended} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not return in 5 s: the slot is deadlocked", what)
		}
	}
}
