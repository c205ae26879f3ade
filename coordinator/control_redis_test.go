package coordinator

import (
	"context"
	"strings"
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
// cost, and a coordinator started later finds the changes. (The first
// start writes the file's limits in the record: generation 1.)
func TestControlSharedMode(t *testing.T) {
	testCluster(t)
	cfg := testConfig()
	open := func(flush bool) *Coordinator { return openControlShared(t, cfg, flush, nil) }
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
	if v.Limiters[0].Limit != 7 || v.Limiters[1].Limit != 9 || len(v.Pauses) != 1 || v.Generation != 4 {
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
	if v.Limiters[0].Limit != 7 || v.Limiters[1].Limit != 9 || len(v.Pauses) != 0 || v.Generation != 5 {
		t.Fatalf("a coordinator started later: %+v", v)
	}
}

// Shared mode: a reload (SIGHUP) of one coordinator's configuration file
// puts the file's limits in force on every coordinator of the store within
// ControlPoll (before, only on the one that read it: the others kept the
// old limits against the same counts); a run-time change made on another
// coordinator over the reloaded limits holds on all of them; and a
// coordinator started with another file puts that file's limits in force
// on all of them (the file read last wins), dropping the run-time change
// made over another value.
func TestControlSharedReload(t *testing.T) {
	testCluster(t)
	logs := &syncBuffer{}
	ctx := context.Background()
	c1, c2 := openControlShared(t, testConfig(), true, nil), openControlShared(t, testConfig(), false, logs)
	seq := int64(0)
	// limitsOn waits until c's replies carry fw's limit want for key k.
	limitsOn := func(c *Coordinator, k string, want int64) {
		t.Helper()
		for deadline := time.Now().Add(5 * ControlPoll); ; time.Sleep(50 * time.Millisecond) {
			seq++
			now := time.Now().UnixNano()
			rp := mustSync(t, c, limitedBatch("a", seq, now, wire.Delta{Limiter: "fw", Key: k, Window: now / sec, Delta: 1}))
			got := viewOf(t, rp, "fw", k).Limit
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("key %q: limit %d after %v, want %d", k, got, 5*ControlPoll, want)
			}
		}
	}
	reloaded := testConfig()
	reloaded.Limiters[0].Limit = 40
	reloaded.Limiters[0].Overrides = []wire.Override{{Key: "vip", Limit: 400}}
	if err := c1.ReloadConfig(ctx, reloaded, "new.json"); err != nil {
		t.Fatal(err)
	}
	limitsOn(c2, "k", 40)
	limitsOn(c2, "vip", 400)
	v, err := c2.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := v.Limiters[0]; l.ConfiguredLimit != 40 || l.ConfiguredOverrides["vip"] != 400 || len(l.Changes) != 0 {
		t.Fatalf("the other coordinator's view of the reloaded file: %+v", l)
	}
	if out := logs.String(); !strings.Contains(out, "config file new.json") || !strings.Contains(out, `limit of limiter \"fw\": 100 -> 40 (from config file new.json)`) {
		t.Fatalf("the other coordinator logged no adoption of the reloaded file's limits:\n%s", out)
	}
	// A run-time change on the second coordinator, made over the
	// reloaded value, holds on the first.
	if err := c2.SetLimit(ctx, "test", "fw", "", 30, "r"); err != nil {
		t.Fatal(err)
	}
	limitsOn(c1, "k", 30)
	// A coordinator started with the old file: its limits win everywhere,
	// and the change made over 40 is dropped.
	c3 := openControlShared(t, testConfig(), false, nil)
	limitsOn(c3, "k", 100)
	limitsOn(c1, "k", 100)
	limitsOn(c2, "vip", 1000)
	v, err = c1.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := v.Limiters[0]; l.ConfiguredLimit != 100 || l.Limit != 100 || len(l.Changes) != 0 {
		t.Fatalf("after a start with the old file: %+v", l)
	}
	// A record without the layer (written by a version before it): each
	// coordinator runs its own file again, c1 the reloaded one.
	if err := c1.ReloadConfig(ctx, reloaded, "new.json"); err != nil {
		t.Fatal(err)
	}
	limitsOn(c2, "k", 40)
	c1.ctl.mu.Lock()
	gen := c1.ctl.rec.Gen
	saved, err := c1.ctl.store.save(ctx, gen, &controlRecord{Gen: gen + 1})
	c1.ctl.mu.Unlock()
	if err != nil || !saved {
		t.Fatalf("saving a record without the layer: %v, %v", saved, err)
	}
	limitsOn(c2, "k", 100)
	limitsOn(c1, "k", 40)
}

// openControlShared opens a coordinator of cfg over the package's Redis Cluster
// (16 buckets), emptied first when flush, logging to log when set; it is
// closed at the end of t.
func openControlShared(t *testing.T, cfg wire.Config, flush bool, log *syncBuffer) *Coordinator {
	t.Helper()
	var rs *redisstore.Store
	if flush {
		rs = openTestRedis(t, redisstore.Options{Buckets: 16})
	} else {
		var err error
		if rs, err = redisstore.Open(context.Background(), redisstore.Options{Addrs: testCluster(t).Addrs(), Buckets: 16}); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{Store: rs, Config: cfg}
	if log != nil {
		withLog(log)(&o)
	}
	c, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
