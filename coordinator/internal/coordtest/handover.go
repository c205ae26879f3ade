package coordtest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// HandoverRig is a coordinator under Handover: its Syncer (read at every
// batch: RollBack may start another), its clock and its hooks.
type HandoverRig struct {
	Syncer   func() Syncer
	Now      func() int64                  // the coordinator's clock, ns
	Step     func() int64                  // advances that clock 10 ms and returns it
	SaveMark func()                        // remembers isolate "A"'s high-water mark as stored now
	RollBack func()                        // stores the remembered mark again (and restarts a coordinator that caches marks)
	SeqError func(err error) bool          // err refuses a batch for its sequence number
	Stats    func() (moved, refused int64) // leases handed over, and batches whose predecessor was refused
}

// The isolate secrets of Handover.
const (
	secretA  = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	secretA2 = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	secretB  = "cccccccccccccccccccccccccccccccc"
)

// handoverEdge is one isolate: the module's core, synced one batch at a
// time.
type handoverEdge struct {
	t      *testing.T
	rig    *HandoverRig
	c      *core.Core
	gen    int
	tamper bool // batches naming a predecessor carry a wrong secret for it
}

// sync sends the edge's batch, if it has one, and applies the reply. A
// batch refused for its sequence number starts a new incarnation with a
// fresh secret, as the hosts do (edge/syncloop), and is resent.
func (e *handoverEdge) sync(now int64) {
	t := e.t
	t.Helper()
	for attempt := 0; attempt < 2; attempt++ {
		out, err := e.c.SyncOut(now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			return
		}
		var b wire.Batch
		if err := b.UnmarshalMsg(out); err != nil {
			t.Fatal(err)
		}
		if e.tamper && b.Prev != "" {
			b.PrevSecret = secretB
		}
		rp, err := e.rig.Syncer().Sync(context.Background(), &b)
		if err != nil && e.rig.SeqError(err) {
			e.gen++
			if err := e.c.Reincarnate(b.Isolate+"~"+strconv.Itoa(e.gen), secretA2); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := e.c.SyncIn(rp.AppendMsg(nil), now); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("refused twice")
}

// admit decides one request of cost 1 on key k, syncing and deciding
// again (at most twice) when the module asks for a lease.
func (e *handoverEdge) admit(k string, now int64) bool {
	e.t.Helper()
	var r core.Result
	for try := 0; try < 3; try++ {
		if err := e.c.Decide(0, []byte(k), 1, now, &r); err != nil {
			e.t.Fatal(err)
		}
		if r.Allowed || !r.SyncRetry {
			return r.Allowed
		}
		e.sync(now)
	}
	return false
}

// Handover runs a reincarnation against rig, whose coordinator runs cfg:
// one leased limiter of limit 100 whose window (an hour) holds the whole
// run. Isolate A admits 30 requests on each of three keys, syncing after
// each; its high-water mark is then rolled back to what it was 30
// requests before (a lost write, as a Redis failover may lose it), so its
// next batch (naming the first key alone) is refused as a gap and A
// starts a new incarnation, which goes on spending its leases. Every
// lease is handed over before A stops gracefully; B is then admitted
// exactly the rest of each key's limit. With c.BadSecret the batches
// naming A carry a wrong secret for it: nothing moves, and A's old leases
// stay reserved (never over the limit). With c.AtStop the mark is rolled
// back just before A stops, so the graceful stop's last batch is the one
// refused, and resent by the new incarnation (still the last, naming A).
// It returns what stayed stranded.
func Handover(t *testing.T, rig HandoverRig, cfg wire.Config, c HandoverCase) (stranded int) {
	t.Helper()
	limit := int(cfg.Limiters[0].Limit)
	newEdge := func(id, secret string) *handoverEdge {
		c := cfg
		c.IsolateID, c.IsolateSecret = id, secret
		cc, err := core.New(c)
		if err != nil {
			t.Fatal(err)
		}
		return &handoverEdge{t: t, rig: &rig, c: cc}
	}
	a, b := newEdge("A", secretA), newEdge("B", secretB)
	keys := []string{"k1", "k2", "k3"}
	admitted := map[string]int{}
	run := func(e *handoverEdge, n int, keys []string) {
		for i := 0; i < n; i++ {
			k := keys[i%len(keys)]
			if e.admit(k, rig.Step()) {
				admitted[k]++
			}
			e.sync(rig.Now())
		}
	}
	run(a, 60, keys)
	rig.SaveMark()
	run(a, 30, keys)
	for _, k := range keys {
		if admitted[k] != 30 {
			t.Fatalf("A admitted %d of its first 30 on %s", admitted[k], k)
		}
	}
	badSecret := c.BadSecret
	a.tamper = badSecret
	if !c.AtStop {
		rig.RollBack()
		run(a, 10, keys[:1])
		if moved, _ := rig.Stats(); !badSecret && moved != int64(len(keys)) {
			// Before its graceful stop, which names every leased key too.
			t.Fatalf("%d leases handed over before A stopped, want %d", moved, len(keys))
		}
	} else {
		run(a, 10, keys[:1])
		rig.RollBack()
	}
	a.c.Release()
	for i := 0; i < 3; i++ {
		a.sync(rig.Step())
	}
	if a.gen != 1 {
		t.Fatalf("A started %d new incarnations, want 1 (its mark rolled back)", a.gen)
	}
	run(b, 3*2*limit, keys)
	moved, refused := rig.Stats()
	t.Logf("admitted %v of %d each; %d leases handed over, %d batches' predecessors refused", admitted, limit, moved, refused)
	for _, k := range keys {
		if admitted[k] > limit {
			t.Fatalf("admitted %d on %s in the window, over the limit %d", admitted[k], k, limit)
		}
		stranded += limit - admitted[k]
	}
	if badSecret {
		if moved != 0 || refused == 0 {
			t.Fatalf("with a wrong predecessor secret: %d handed over, %d refused", moved, refused)
		}
		return stranded
	}
	if stranded != 0 || moved != int64(len(keys)) {
		t.Fatalf("%d leases handed over, want %d: the old incarnation's leases stranded %d", moved, len(keys), stranded)
	}
	return stranded
}

// HandoverCase is how Handover's reincarnation comes (see Handover).
type HandoverCase struct {
	BadSecret bool // the batches naming the predecessor carry a wrong secret for it
	AtStop    bool // the graceful stop's last batch is the one refused
}

// HandoverStart is a time one minute into an hour, after T0: Handover's
// run falls in one window of its limiter.
func HandoverStart() int64 {
	return (T0/int64(time.Hour)+1)*int64(time.Hour) + int64(time.Minute)
}

// HandoverConfig is Handover's configuration: one limiter "s" of 100 an
// hour, of algorithm alg in mode.
func HandoverConfig(alg, mode string) wire.Config {
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: alg, Mode: mode, Limit: 100, Period: int64(time.Hour)}}}
}
