package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A view that carries the configured limit again undoes a limit adopted
// from an earlier one: a full-window notice tells the fleet's agreed limit
// (an upstream announced 3 of 10), which nothing else ended for an isolate
// without the key's upstream state (it answered limit 3 for good, and
// admitted a third of what the others did), and a run-time limit the
// operator changed back stayed too.
func TestConfiguredLimitComesBack(t *testing.T) {
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 10, Period: 1e9, Mode: wire.Approximate}}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := int64(1000e9)
	var r Result
	seq := int64(0)
	reply := func(at, limit int64) {
		t.Helper()
		if b, err := c.SyncOut(at, nil); err != nil || len(b) == 0 {
			t.Fatalf("no batch at %d: %v", at, err)
		}
		seq++
		rp := wire.Reply{Version: wire.Version, Seq: seq, At: at, Entries: []wire.View{
			{Limiter: "a", Key: "k", Window: at / 1e9, Count: 1, Lease: -1, Isolates: 2, Limit: limit}}}
		if err := c.SyncIn(rp.AppendMsg(nil), at+1e6); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Decide(0, []byte("k"), 1, t0, &r); err != nil || !r.Allowed || r.Limit != 10 {
		t.Fatalf("first: %+v, %v", r, err)
	}
	reply(t0+10e6, 3)
	if err := c.Decide(0, []byte("k"), 1, t0+20e6, &r); err != nil || r.Limit != 3 {
		t.Fatalf("after a view of limit 3: %+v, %v; want limit 3", r, err)
	}
	reply(t0+30e6, 10)
	if err := c.Decide(0, []byte("k"), 1, t0+40e6, &r); err != nil || r.Limit != 10 {
		t.Fatalf("after a view of the configured limit: %+v, %v; want limit 10 again", r, err)
	}
}
