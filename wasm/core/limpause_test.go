//go:build !wasip1

package core_test

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A limiter paused as a whole (wire.Reply.Paused) denies every key of it
// from the reply on, one the isolate never synced included, for the pause
// left; a reply that no longer names it lifts it; a pause no coordinator
// could send refuses the reply.
func TestLimiterPauseDeniesEveryKey(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso", Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 100, Period: sec, Mode: wire.Approximate},
		{Name: "b", Algorithm: wire.FixedWindow, Limit: 100, Period: sec, Mode: wire.Approximate},
	}}
	c := newCore(t, cfg)
	now := 100 * sec
	var r wire.Result
	a, b := c.LimiterIndex("a"), c.LimiterIndex("b")
	if err := c.Decide(a, []byte("k1"), 1, now, &r); err != nil || !r.Allowed {
		t.Fatalf("before: %+v %v", r, err)
	}
	seq := int64(0)
	reply := func(at int64, paused ...wire.LimiterPause) error {
		t.Helper()
		if out, err := c.SyncOut(at, nil); err != nil || len(out) == 0 {
			t.Fatalf("sync out: %d bytes, %v", len(out), err)
		}
		seq++
		rp := wire.Reply{Version: wire.Version, Seq: seq, At: at, Paused: paused}
		return c.SyncIn(rp.AppendMsg(nil), at+1)
	}
	if err := reply(now+sec/10, wire.LimiterPause{Limiter: "a", Left: 30 * sec}); err != nil {
		t.Fatal(err)
	}
	now += sec / 5
	for _, key := range []string{"k1", "never-seen"} {
		if err := c.Decide(a, []byte(key), 1, now, &r); err != nil || r.Allowed || r.SyncRetry || r.RetryAfter < 29*sec {
			t.Errorf("key %s of the paused limiter: %+v %v; want denied for about 30 s", key, r, err)
		}
	}
	if err := c.Decide(b, []byte("k1"), 1, now, &r); err != nil || !r.Allowed {
		t.Errorf("another limiter: %+v %v; want admitted", r, err)
	}
	if err := reply(now + sec/10); err != nil { // resumed: not named
		t.Fatal(err)
	}
	now += sec / 5
	if err := c.Decide(a, []byte("never-seen-2"), 1, now, &r); err != nil || !r.Allowed {
		t.Errorf("after the resume: %+v %v; want admitted", r, err)
	}
	for _, left := range []int64{0, -5, wire.MaxPeriod*12 + 1} {
		if err := reply(now+sec/10, wire.LimiterPause{Limiter: "a", Left: left}); err == nil {
			t.Errorf("a pause of %d ns accepted", left)
		}
		c, seq = newCore(t, cfg), 0 // the refused reply left the batch outstanding
		if err := c.Decide(a, []byte("k1"), 1, now, &r); err != nil {
			t.Fatal(err)
		}
	}
}
