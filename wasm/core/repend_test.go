//go:build !wasip1

package core_test

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// rependCfg is one strict key of limit per 10 s, for isolate id.
func rependCfg(id string, limit int64) wire.Config {
	return wire.Config{Version: wire.Version, IsolateID: id, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: limit, Period: 10 * sec, Mode: wire.Strict}}}
}

// stepStrictInFlight has isolate a, 1.5 s ahead of m's clock (within the
// skew), spend a lease of its strict key in the window after the
// coordinator's, cut the batch its held request makes, and be told the
// step while it is out; the reply comes at t0+6 ms. It returns the units a
// admitted.
func stepStrictInFlight(t *testing.T, m interface {
	Apply(*wire.Batch, int64) (*wire.Reply, error)
}, a *core.Core, t0 int64) int64 {
	t.Helper()
	const ahead = 1500e6
	var r core.Result
	now := t0 + ahead
	if err := a.Decide(0, []byte("k"), 4, now, &r); err != nil || !r.SyncRetry {
		t.Fatal(r, err)
	}
	rp, err := m.Apply(decodeBatch(t, out(t)(a.SyncOut(now, nil))), t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SyncIn(rp.AppendMsg(nil), now+1); err != nil {
		t.Fatal(err)
	}
	admitted := int64(0)
	for i := int64(0); i < 20; i++ {
		if err := a.Decide(0, []byte("k"), 1, now+2+i, &r); err != nil {
			t.Fatal(err)
		}
		if !r.Allowed {
			break
		}
		admitted++
	}
	if admitted == 0 {
		t.Fatal("the lease admitted nothing")
	}
	b := decodeBatch(t, out(t)(a.SyncOut(now+5e6, nil)))
	a.ClockOffset(-ahead) // told the step while the batch is out
	if rp, err = m.Apply(b, t0+5e6); err != nil {
		t.Fatal(err)
	}
	if err := a.SyncIn(rp.AppendMsg(nil), t0+6e6); err != nil {
		t.Fatal(err)
	}
	return admitted
}

// A strict key's cost that a step moved while its batch was in flight is
// reported again at once, with what a request held since asks for: the
// next SyncOut cuts a batch naming the key, its demand the cost reported
// again plus the held request's. A first version added the cost to the
// key's unreported cost only: a strict key's is reported lazily (a lease
// reserved it), and the held request's ask, under it, cut no batch in 5 s.
func TestRependAsksForTheHeldRequest(t *testing.T) {
	cfg := rependCfg("A", 100)
	m := retimeMerger(t, cfg)
	a, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t0 := 100_000*sec + 10*sec - 1*sec
	again := stepStrictInFlight(t, m, a, t0)
	var r core.Result
	if err := a.Decide(0, []byte("k"), 2, t0+7e6, &r); err != nil {
		t.Fatal(err)
	}
	o := out(t)(a.SyncOut(t0+8e6, nil))
	if len(o) == 0 {
		t.Fatalf("no batch cut after %d units were to be reported again (stats %+v)", again, a.Stats())
	}
	b := decodeBatch(t, o)
	if len(b.Entries) != 1 || b.Entries[0].Delta != again || b.Entries[0].Demand < again+2 {
		t.Errorf("the batch reports %+v; want the key's %d units again and an ask of 2 more", b.Entries, again)
	}
}

// The same step on a strict key of 10, and another isolate B deciding in
// the coordinator's window after the reply: the units isolate A admitted
// (really in that window: A's clock was ahead) and B's never pass 10. A
// first version reported A's units again lazily, and B admitted 10 more.
func TestStrictStepWithBatchInFlightKeepsTheLimit(t *testing.T) {
	m := retimeMerger(t, rependCfg("A", 10))
	a, err := core.New(rependCfg("A", 10))
	if err != nil {
		t.Fatal(err)
	}
	b, err := core.New(rependCfg("B", 10))
	if err != nil {
		t.Fatal(err)
	}
	t0 := 100_000*sec + 10*sec - 1*sec
	nA := stepStrictInFlight(t, m, a, t0)
	sync := func(c *core.Core, now int64) {
		t.Helper()
		if o := out(t)(c.SyncOut(now, nil)); len(o) > 0 {
			rp, err := m.Apply(decodeBatch(t, o), now)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.SyncIn(rp.AppendMsg(nil), now+1); err != nil {
				t.Fatal(err)
			}
		}
	}
	sync(a, t0+10e6) // A's next scheduled sync
	var r core.Result
	nB := int64(0)
	now := t0 + 20e6
	for round := 0; round < 20; round++ {
		if err := b.Decide(0, []byte("k"), 1, now, &r); err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			nB++
		} else if r.SyncRetry {
			sync(b, now)
		}
		now += 1e6
		if round%3 == 2 {
			sync(a, now)
			sync(b, now)
		}
	}
	if nA+nB > 10 {
		t.Errorf("A admitted %d in the window before the step, B %d after: %d in a window of 10", nA, nB, nA+nB)
	}
}
