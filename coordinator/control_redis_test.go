package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Shared mode: the control record lives in the Redis Cluster. A change
// made on one coordinator is in force on another within ControlPoll (its
// replies carry the new limit and the pause, the pause told
// ControlPauseChunk at a time: no reset notices there), a change on the
// second is made over the first's (none lost), a resume on the first
// resets the key in the second's replies to a batch that names it without
// cost, and a coordinator started later finds the changes.
func TestControlSharedMode(t *testing.T) {
	testCluster(t)
	cfg := testConfig()
	open := func(flush bool) *Coordinator {
		var rs *redisstore.Store
		if flush {
			rs = openTestRedis(t, redisstore.Options{Buckets: 16})
		} else {
			var err error
			if rs, err = redisstore.Open(context.Background(), redisstore.Options{Addrs: testCluster(t).Addrs(), Buckets: 16}); err != nil {
				t.Fatal(err)
			}
		}
		c, err := Open(Options{Store: rs, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := context.Background()
	c1, c2 := open(true), open(false)
	if err := c1.SetLimit(ctx, "test", "fw", "", 7, "r"); err != nil {
		t.Fatal(err)
	}
	if err := c1.PauseFleet(ctx, "test", "sw", "", time.Hour, "kill switch"); err != nil {
		t.Fatal(err)
	}
	seq := int64(0)
	var rp *wire.Reply
	deadline := time.Now().Add(5 * ControlPoll)
	for {
		seq++
		now := time.Now().UnixNano()
		b := limitedBatch("a", seq, now, wire.Delta{Limiter: "fw", Key: "k", Window: now / sec, Delta: 1},
			wire.Delta{Limiter: "sw", Key: "k", Window: now / sec, Delta: 1})
		rp = mustSync(t, c2, b)
		if viewOf(t, rp, "fw", "k").Limit == 7 && upPause(rp, "sw", "k") > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second coordinator's reply after %v: %+v", 5*ControlPoll, rp)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p := upPause(rp, "sw", "k"); p > int64(ControlPauseChunk) {
		t.Fatalf("shared mode told a pause of %v, want at most %v at a time", time.Duration(p), ControlPauseChunk)
	}
	// A change on the second coordinator, over the first's.
	if err := c2.SetLimit(ctx, "test", "sw", "", 9, "r2"); err != nil {
		t.Fatal(err)
	}
	v, err := c1.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.Limiters[0].Limit != 7 || v.Limiters[1].Limit != 9 || len(v.Pauses) != 1 || v.Generation != 3 {
		t.Fatalf("first coordinator after the second's change: %+v", v)
	}
	if err := c1.ResumeFleet(ctx, "test", "sw", "", ""); err != nil {
		t.Fatal(err)
	}
	// An isolate that holds the pause names the key without cost (its
	// recheck): the second coordinator's reply resets the key there, and
	// tells no pause, once it read the resume.
	for deadline := time.Now().Add(5 * ControlPoll); ; time.Sleep(50 * time.Millisecond) {
		seq++
		now := time.Now().UnixNano()
		rp = mustSync(t, c2, batch("a", seq, now, wire.Delta{Limiter: "sw", Key: "k", Window: now / sec}))
		if named(rp, "sw", "k") && upPause(rp, "sw", "k") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second coordinator's reply after the resume: resets %+v, up %+v", rp.Resets, rp.Upstream)
		}
	}
	// A batch with cost for the key is not reset (the isolate was not
	// holding a pause).
	seq++
	now := time.Now().UnixNano()
	if rp = mustSync(t, c2, batch("a", seq, now, wire.Delta{Limiter: "sw", Key: "k", Window: now / sec, Delta: 1})); named(rp, "sw", "k") {
		t.Fatalf("a batch with cost got a reset of the key: %+v", rp.Resets)
	}
	// A coordinator started later (a restart) has them.
	v, err = open(false).Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.Limiters[0].Limit != 7 || v.Limiters[1].Limit != 9 || len(v.Pauses) != 0 || v.Generation != 4 {
		t.Fatalf("a coordinator started later: %+v", v)
	}
}
