package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// With Config.Heartbeat an isolate with nothing to report cuts an empty
// batch once that long has passed since its last one (a sign of life for
// the coordinator's dashboard); without it, it sends nothing.
func TestHeartbeat(t *testing.T) {
	for _, hb := range []int64{0, 10e9} {
		c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Heartbeat: hb, Limiters: []wire.LimiterConfig{
			{Name: "a", Algorithm: wire.FixedWindow, Limit: 5, Period: 1e9}}})
		if err != nil {
			t.Fatal(err)
		}
		cut := func(now int64) bool {
			t.Helper()
			b, err := c.SyncOut(now, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) == 0 {
				return false
			}
			rp := wire.Reply{Version: wire.Version, Seq: c.seq, At: now}
			if err := c.SyncIn(rp.AppendMsg(nil), now); err != nil {
				t.Fatal(err)
			}
			return true
		}
		now := int64(100e9)
		var r Result
		c.Decide(0, []byte("k"), 1, now, &r)
		if !cut(now) {
			t.Fatalf("heartbeat %d: an admission made no batch", hb)
		}
		if cut(now + 5e9) {
			t.Fatalf("heartbeat %d: a batch 5 s after the last with nothing to report", hb)
		}
		if got := cut(now + 10e9); got != (hb > 0) {
			t.Fatalf("heartbeat %d: a batch 10 s after the last: %v, want %v", hb, got, hb > 0)
		}
	}
	bad := wire.Config{Version: wire.Version, IsolateID: "i", Heartbeat: 1, Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 5, Period: 1e9}}}
	if _, err := New(bad); err == nil {
		t.Fatal("a heartbeat of 1 ns was accepted")
	}
}
