//go:build !wasip1

// These tests merge through the coordinator (a host package, not built for
// wasip1).

package core_test

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"
	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// retimeCfg: an approximate key of 5 per 10 s (its denials are final), a
// strict one of 100 per 10 s (its first request waits for a lease), and an
// approximate one that follows its upstream (its signals ride in batches).
func retimeCfg() wire.Config {
	return wire.Config{Version: wire.Version, IsolateID: "iso", Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 5, Period: 10 * sec},
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: 10 * sec, Mode: wire.Strict},
		llmLimiter(wire.Approximate)}}
}

func retimeMerger(t *testing.T, cfg wire.Config) *merge.Merger {
	t.Helper()
	store, err := pebblestore.Open(vfs.NewMem(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	m, err := merge.NewMerger(cfg, store, merge.MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// retimeIsolate returns a merger over Pebble in memory and an isolate, both
// of cfg.
func retimeIsolate(t *testing.T, cfg wire.Config) (*merge.Merger, *core.Core) {
	t.Helper()
	c, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return retimeMerger(t, cfg), c
}

// cutRefused cuts c's batch at cutAt (ns, the isolate's clock) and has m
// refuse it for its times at coordNow (ns): it returns the batch.
func cutRefused(t *testing.T, m *merge.Merger, c *core.Core, cutAt, coordNow int64) *wire.Batch {
	t.Helper()
	b := decodeBatch(t, out(t)(c.SyncOut(cutAt, nil)))
	if _, err := m.Apply(b, coordNow); !errors.Is(err, merge.ErrClockSkew) {
		t.Fatalf("the batch cut at %d, applied at %d: %v, want merge.ErrClockSkew", cutAt, coordNow, err)
	}
	return b
}

// recallAt has c take the step the refusal's reading tells (ClockOffset),
// take the refused batch back at now (ns) and cut it again: it returns the
// batch cut again.
func recallAt(t *testing.T, c *core.Core, step, now int64) *wire.Batch {
	t.Helper()
	c.ClockOffset(step)
	if err := c.Recall(now, false); err != nil {
		t.Fatal(err)
	}
	return decodeBatch(t, out(t)(c.SyncOut(now, nil)))
}

// flood has c decide n new keys (x-a, x-b, ...) uses times each at at
// (ns): a full table evicts the keys before them.
func flood(t *testing.T, c *core.Core, n, uses int, at int64) {
	t.Helper()
	var r core.Result
	for i := 0; i < n; i++ {
		for j := 0; j < uses; j++ {
			if err := c.Decide(0, []byte{'x', byte('a' + i)}, 1, at, &r); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// amendRefused has c, ahead (ns) of m's clock at t0 (ns), admit 3 units on
// a/k and hold a request on s/k, cut a batch m refuses for its times, hold
// a request on s/k2 and amend the batch: it returns the amendment.
func amendRefused(t *testing.T, m *merge.Merger, c *core.Core, t0, ahead int64) []byte {
	t.Helper()
	var r core.Result
	for i := int64(0); i < 3; i++ {
		if err := c.Decide(0, []byte("k"), 1, t0+ahead+i, &r); err != nil || !r.Allowed {
			t.Fatal(r, err)
		}
	}
	if err := c.Decide(1, []byte("k"), 1, t0+ahead+5, &r); err != nil || !r.SyncRetry {
		t.Fatal(r, err)
	}
	cutRefused(t, m, c, t0+ahead+1e6, t0)
	if err := c.Decide(1, []byte("k2"), 1, t0+ahead+10e6, &r); err != nil || !r.SyncRetry {
		t.Fatal(r, err)
	}
	am, err := c.Amend(t0+ahead+10e6, nil)
	if err != nil || len(am) == 0 {
		t.Fatalf("amend: %d bytes, %v", len(am), err)
	}
	return am
}

func decodeBatch(t *testing.T, out []byte) *wire.Batch {
	t.Helper()
	var b wire.Batch
	if err := b.UnmarshalMsg(out); err != nil {
		t.Fatalf("the module's batch does not decode: %v", err)
	}
	return &b
}

// A host that could not read the coordinator's time at start runs 30 s
// ahead of it (past the coordinator's 2 s skew): its isolate admits alone,
// denies, holds a strict request and sees an upstream 429, then cuts a
// batch, which the coordinator refuses for its times and applies nothing
// of. Told the step (ClockOffset) and recalling the batch (Recall), the
// isolate cuts it again under the same sequence number at the
// coordinator's time: every window is the coordinator's current one, and
// it carries the 5 units admitted, the 3 final denials, the held request's
// ask and the upstream signal. The coordinator applies it; the strict key
// then decides locally under its lease. Without Recall the batch is resent
// as it was and refused until the coordinator's clock gets 28 s further.
func TestRecallAfterClockSkewRefusal(t *testing.T) {
	m, c := retimeIsolate(t, retimeCfg())
	const ahead = 30 * sec
	t0 := 100_000*sec + 3*sec // the coordinator's time; windows of 10 s start at 100,000 s
	var r core.Result
	admitted, denied := 0, 0
	for i := int64(0); i < 8; i++ {
		if err := c.Decide(0, []byte("k"), 1, t0+ahead+i*1e6, &r); err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		} else {
			denied++
		}
	}
	if admitted != 5 || denied != 3 {
		t.Fatalf("alone: %d admitted, %d denied; want 5 and 3", admitted, denied)
	}
	if err := c.Decide(1, []byte("k"), 1, t0+ahead+10e6, &r); err != nil || !r.SyncRetry {
		t.Fatalf("strict key: %+v, %v; want SyncRetry", r, err)
	}
	var o wire.Observed
	if err := c.Observe(2, []byte("k"), 429, [][2]string{{"Retry-After", "5"}}, false, t0+ahead+11e6, &o); err != nil {
		t.Fatal(err)
	}
	first := decodeBatch(t, out(t)(c.SyncOut(t0+ahead+12e6, nil)))
	if _, err := m.Apply(first, t0); !errors.Is(err, merge.ErrClockSkew) {
		t.Fatalf("the batch cut 30 s ahead: %v, want merge.ErrClockSkew", err)
	}
	if err := m.Commit(t0); err != nil {
		t.Fatal(err)
	}

	// The refusal's answer carries the coordinator's time: the host steps.
	now := t0 + 20e6
	b := recallAt(t, c, -ahead, now)
	if b.Seq != first.Seq || b.At != now {
		t.Fatalf("batch cut again: seq %d at %d; want seq %d at %d", b.Seq, b.At, first.Seq, now)
	}
	w := t0 / (10 * sec)
	cost := map[string]int64{}
	for _, d := range b.Entries {
		if d.Window != w {
			t.Errorf("entry %s/%s names window %d, want the coordinator's %d", d.Limiter, d.Key, d.Window, w)
		}
		cost[d.Limiter] += d.Delta
		if d.Limiter == "s" && d.Demand < 1 {
			t.Errorf("the held strict request's ask is gone: %+v", d)
		}
	}
	if cost["a"] != 5 || cost["s"] != 0 {
		t.Errorf("costs carried: %v, want a:5 s:0", cost)
	}
	if len(b.Denials) != 1 || b.Denials[0].Cost != 3 || b.Denials[0].Window != w {
		t.Errorf("denials carried: %+v, want 3 in window %d", b.Denials, w)
	}
	if len(b.Signals) != 1 || b.Signals[0].Key != "k" {
		t.Errorf("signals carried: %+v, want the 429 on llm/k", b.Signals)
	}
	rp, err := m.Apply(b, now)
	if err != nil {
		t.Fatalf("the batch cut again: %v", err)
	}
	if err := m.Commit(now); err != nil {
		t.Fatal(err)
	}
	for _, v := range rp.Entries {
		if v.Limiter == "a" && v.Count != 5 {
			t.Errorf("the coordinator counts %d on a/k, want 5", v.Count)
		}
	}
	if err := c.SyncIn(rp.AppendMsg(nil), now+20e6); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(1, []byte("k"), 1, now+30e6, &r); err != nil || !r.Allowed {
		t.Fatalf("strict key after the reply: %+v, %v; want admitted under its lease", r, err)
	}
	if err := c.Recall(now, false); !errors.Is(err, core.ErrNothingToRecall) {
		t.Errorf("Recall with no batch outstanding: %v, want ErrNothingToRecall", err)
	}
}

// A host whose clock was 30 s behind the coordinator's steps forward at its
// first reading: the cost its isolate admitted before is counted in the
// coordinator's current window (the latest it can have been admitted in),
// not in the window 30 s back, where it would not count against the limit
// of the window it was admitted in. A step of 150 ms inside a window moves
// nothing.
func TestStepForwardCountsInTheCurrentWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		behind  int64
		wantWin func(t0 int64) int64
	}{
		{"30 s behind", 30 * sec, func(t0 int64) int64 { return t0 / (10 * sec) }},
		{"150 ms behind, inside a window", 150e6, func(t0 int64) int64 { return t0 / (10 * sec) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, c := retimeIsolate(t, retimeCfg())
			t0 := 100_000*sec + 5*sec
			var r core.Result
			for i := int64(0); i < 4; i++ {
				if err := c.Decide(0, []byte("k"), 1, t0-tc.behind+i*1e6, &r); err != nil || !r.Allowed {
					t.Fatalf("decision %d: %+v, %v", i, r, err)
				}
			}
			c.ClockOffset(tc.behind)
			b := decodeBatch(t, out(t)(c.SyncOut(t0+10e6, nil)))
			if len(b.Entries) != 1 || b.Entries[0].Window != tc.wantWin(t0) || b.Entries[0].Delta != 4 {
				t.Fatalf("batch entries %+v, want 4 in window %d", b.Entries, tc.wantWin(t0))
			}
			rp, err := m.Apply(b, t0+10e6)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.SyncIn(rp.AppendMsg(nil), t0+20e6); err != nil {
				t.Fatal(err)
			}
			// All 4 counted where the isolate decides now: one more is
			// the fifth of 5, the next is denied.
			for i, want := range []bool{true, false} {
				if err := c.Decide(0, []byte("k"), 1, t0+30e6+int64(i), &r); err != nil || r.Allowed != want {
					t.Fatalf("decision after the step %d: %+v, %v; want allowed %v", i, r, err, want)
				}
			}
		})
	}
}

// A step while a batch is in flight, across a window's start, either
// way (the host 1.5 s ahead, within the coordinator's skew, or 1.5 s
// behind): the coordinator applies the batch in the window it names, not
// the key's window on the new clock, the coordinator's current one. The
// next batch reports the units again in the current window, where the
// coordinator then counts them, and the key admits only what the limit
// has left. A first version kept them only in the key's own counters:
// the coordinator's current window lacked them, and another isolate
// admitted past the limit there (8 in a window of 5); before that, the
// reply took them off the key too.
func TestStepWithBatchInFlight(t *testing.T) {
	for _, tc := range []struct {
		name        string
		coord, step int64 // the coordinator's time, the host's clock's error (ns)
	}{
		{"back", 100_000*sec + 10*sec - 1*sec, 1500e6},
		{"forward", 100_000*sec + 10*sec + 1*sec, -1500e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, c := retimeIsolate(t, retimeCfg())
			t0 := tc.coord
			var r core.Result
			for i := int64(0); i < 3; i++ {
				if err := c.Decide(0, []byte("k"), 1, t0+tc.step+i*1e6, &r); err != nil || !r.Allowed {
					t.Fatalf("decision %d: %+v, %v", i, r, err)
				}
			}
			b := decodeBatch(t, out(t)(c.SyncOut(t0+tc.step+5e6, nil)))
			c.ClockOffset(-tc.step) // learnt from another answer while the batch is out
			rp, err := m.Apply(b, t0+10e6)
			if err != nil {
				t.Fatalf("a batch 1.5 s off is within the skew: %v", err)
			}
			if err := c.SyncIn(rp.AppendMsg(nil), t0+20e6); err != nil {
				t.Fatal(err)
			}
			cur := t0 / (10 * sec)
			again := decodeBatch(t, out(t)(c.SyncOut(t0+30e6, nil)))
			if len(again.Entries) != 1 || again.Entries[0].Window != cur || again.Entries[0].Delta != 3 {
				t.Fatalf("the next batch reports %+v, want the 3 units in window %d", again.Entries, cur)
			}
			if n := c.Stats().ReportedAgain; n != 3 {
				t.Errorf("stats: reported_again %d, want 3", n)
			}
			rp, err = m.Apply(again, t0+40e6)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.SyncIn(rp.AppendMsg(nil), t0+50e6); err != nil {
				t.Fatal(err)
			}
			ks, err := m.KeyState("a", "k", t0+60e6)
			if err != nil {
				t.Fatal(err)
			}
			inCur := ks.Count // the record's latest window is the current one, or the next (back: the batch named it)
			if ks.Window == cur+1 {
				inCur = ks.Prev
			}
			if inCur != 3 || ks.Window < cur || ks.Window > cur+1 {
				t.Fatalf("the coordinator counts %d in window %d (%+v), want 3", inCur, cur, ks)
			}
			more := 0
			for i := int64(0); i < 6; i++ {
				if err := c.Decide(0, []byte("k"), 1, t0+70e6+i*1e6, &r); err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					more++
				}
			}
			if more != 2 {
				t.Errorf("admitted %d more after 3 in the window, want 2 (limit 5)", more)
			}
		})
	}
}

// A correction forward of 200 ms (a host a little behind; the first
// sync answer after a reading whose bracket was wide) with a batch in
// flight, told after the key's window ended on the new clock: the key's
// counters move whole to the next window (conservative, for the isolate's
// own decisions), but the key's units were all admitted 100 ms before
// that window began on the new clock (its batch was cut after it began),
// so every unit was admitted in the window the batch named, where the
// coordinator counts it: nothing is reported again. A first version
// reported the 3 units again in the next window: the coordinator counted 6
// of 3. Key z's unit, admitted after the window began on the new clock,
// is reported again.
func TestSmallStepForwardWithBatchInFlightReportsNothingAgain(t *testing.T) {
	m, c := retimeIsolate(t, retimeCfg())
	w := int64(10_001)
	host := (w+1)*10*sec - 300e6 // the host's clock, 200 ms behind the coordinator's
	const behind = 200e6
	var r core.Result
	for i := int64(0); i < 3; i++ {
		if err := c.Decide(0, []byte("k"), 1, host+i, &r); err != nil || !r.Allowed {
			t.Fatal(r, err)
		}
	}
	// The batch is cut 140 ms before the window's end on the host's clock:
	// 60 ms into the next window on the coordinator's, but k's units were
	// all admitted 300 ms before the end.
	if err := c.Decide(0, []byte("z"), 1, host+160e6, &r); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	b := decodeBatch(t, out(t)(c.SyncOut(host+160e6, nil)))
	c.ClockOffset(behind)
	now := (w+1)*10*sec + 60e6 // 60 ms into the next window, on the coordinator's clock
	rp, err := m.Apply(b, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SyncIn(rp.AppendMsg(nil), now+1e6); err != nil {
		t.Fatal(err)
	}
	if o := out(t)(c.SyncOut(now+2e6, nil)); len(o) > 0 {
		for _, e := range decodeBatch(t, o).Entries {
			if e.Key == "k" {
				t.Errorf("the next batch reports k again: %+v", e)
			}
		}
	}
	if n := c.Stats().ReportedAgain; n != 1 {
		t.Errorf("reported_again %d, want 1 (z's unit, admitted 60 ms into the next window on the new clock)", n)
	}
	if ks, err := m.KeyState("a", "k", now+3e6); err != nil || ks.Count+ks.Prev != 3 {
		t.Errorf("the coordinator counts %+v, %v; want the 3 units once", ks, err)
	}
}

// out fails t on a SyncOut error and returns the batch.
func out(t *testing.T) func([]byte, error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// FuzzClockStepRecall drives an isolate through decisions, syncs through
// the real merge code and steps of its host's own clock (up to a minute
// either way), the host telling the module the coordinator's offset at
// readings (every answer of the coordinator is one). Whenever the
// coordinator refuses a batch for its times, the host takes the reading
// the refusal carries, tells the module and recalls the batch: the batch
// cut again at the coordinator's time must be applied, under the same
// sequence number. Nothing may panic, no other refusal may come, the
// module takes every reply, and the coordinator never counts more units
// than were admitted.
func FuzzClockStepRecall(f *testing.F) {
	f.Add([]byte{0, 1, 0, 4, 2, 60, 0, 1, 0, 2, 3, 0, 1, 10, 0, 1, 3, 0})
	f.Add([]byte{0, 0, 3, 0, 2, 196, 0, 0, 0, 1, 3, 0, 4, 0, 0, 0, 3, 0, 5, 0})
	f.Add([]byte{2, 20, 0, 1, 0, 1, 3, 0, 1, 200, 0, 2, 3, 0, 2, 0, 0, 2, 3, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		cfg := wire.Config{Version: wire.Version, IsolateID: "iso", MaxKeys: 8, Limiters: []wire.LimiterConfig{ // 24 keys in 8 slots: evictions
			{Name: "a", Algorithm: wire.FixedWindow, Limit: 50, Period: sec},
			{Name: "s", Algorithm: wire.FixedWindow, Limit: 50, Period: sec, Mode: wire.Strict},
			{Name: "w", Algorithm: wire.SlidingWindow, Limit: 50, Period: sec}}}
		m := retimeMerger(t, cfg)
		c, err := core.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		real := 100_000 * sec // the coordinator's clock
		own, told := int64(0), int64(0)
		var r core.Result
		admitted, counted := int64(0), int64(0) // units admitted; units of batches the merger applied
		apply := func(out []byte, hostNow int64) (*wire.Reply, error) {
			b := decodeBatch(t, out)
			dups := m.Stats().Duplicates
			rp, err := m.Apply(b, real)
			if err == nil {
				if err := m.Commit(real); err != nil {
					t.Fatal(err)
				}
				if m.Stats().Duplicates == dups {
					for _, d := range b.Entries {
						counted += d.Delta
					}
				}
			}
			return rp, err
		}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, ops[i+1]
			now := real + own + told
			switch op {
			case 0:
				if err := c.Decide(int(arg%3), []byte{'k', '0' + arg/3%8}, 1, now, &r); err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					admitted++
				}
			case 1:
				real += int64(arg) * 10e6
			case 2:
				own = int64(int8(arg)) * 500e6 // the host's own clock set
			case 3:
				out, err := c.SyncOut(now, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(out) == 0 {
					continue
				}
				seq := decodeBatch(t, out).Seq
				rp, err := apply(out, now)
				if errors.Is(err, merge.ErrClockSkew) {
					told = -own // the refusal's reading
					c.ClockOffset(told)
					now = real + own + told
					if rerr := c.Recall(now, false); rerr != nil {
						t.Fatalf("op %d: recall after %v: %v", i, err, rerr)
					}
					if out, err = c.SyncOut(now, nil); err != nil {
						t.Fatal(err)
					}
					if len(out) == 0 {
						continue
					}
					if b := decodeBatch(t, out); b.Seq != seq {
						t.Fatalf("op %d: the batch cut again is seq %d, the refused one %d", i, b.Seq, seq)
					}
					if rp, err = apply(out, now); err != nil {
						t.Fatalf("op %d: the batch cut again at the coordinator's time: %v", i, err)
					}
				} else if err != nil {
					t.Fatalf("op %d: %v", i, err)
				} else if told != -own {
					// Every answer carries the coordinator's time: the
					// host reads it before it applies the reply.
					told = -own
					c.ClockOffset(told)
					now = real + own + told
				}
				if err := c.SyncIn(rp.AppendMsg(nil), now); err != nil {
					t.Fatalf("op %d: sync in: %v", i, err)
				}
			case 4:
				told = -own // a reading
				c.ClockOffset(told)
			case 5:
				if c.Outstanding() {
					continue
				}
				if err := c.Recall(now, false); !errors.Is(err, core.ErrNothingToRecall) {
					t.Fatalf("op %d: recall with nothing outstanding: %v", i, err)
				}
			}
			// Units may be lost (a key idle for two windows drops its
			// unsent units, as any isolate that does not sync), never
			// counted twice but for those a step moved while their batch
			// was in flight (reported again in the window they moved to).
			if again := c.Stats().ReportedAgain; counted > admitted+again {
				t.Fatalf("op %d: the coordinator counted %d units, %d were admitted (%d reported again)", i, counted, admitted, again)
			}
		}
	})
}

// A held request amended the outstanding batch, whose times were refused
// (the host just past the coordinator's skew); the amendment, sent later,
// was applied (the coordinator's clock had moved on). The batch is not
// taken back (Recall: ErrNothingToRecall): resent as it was, the
// coordinator answers it as the retry of a number it applied, and every
// unit is counted once. Taking it back counted 3 of 5 (its reply applied
// to the batch cut again) or 8 of 5 (the batch cut again refused as a
// conflict and sent again under a new incarnation).
func TestRecallRefusesAnAmendedBatch(t *testing.T) {
	m, c := retimeIsolate(t, retimeCfg())
	t0 := 100_000*sec + 3*sec
	const ahead = 2500e6
	am := amendRefused(t, m, c, t0, ahead)
	var r core.Result
	if _, err := m.Apply(decodeBatch(t, am), t0+600e6); err != nil {
		t.Fatalf("the amendment 0.6 s later: %v", err)
	}
	if err := m.Commit(t0 + 600e6); err != nil {
		t.Fatal(err)
	}
	c.ClockOffset(-ahead) // the batch's refusal reaches the host
	now := t0 + 700e6
	if err := c.Recall(now, false); !errors.Is(err, core.ErrNothingToRecall) {
		t.Fatalf("Recall of an amended batch: %v, want ErrNothingToRecall", err)
	}
	resent := out(t)(c.SyncOut(now, nil))
	rp, err := m.Apply(decodeBatch(t, resent), now)
	if err != nil {
		t.Fatalf("the batch resent: %v, want the answer to a retry", err)
	}
	if err := c.SyncIn(rp.AppendMsg(nil), now+1e6); err != nil {
		t.Fatal(err)
	}
	admitted := int64(3)
	for i := int64(0); i < 2; i++ {
		if err := c.Decide(0, []byte("k"), 1, now+2e6+i, &r); err != nil || !r.Allowed {
			t.Fatal(r, err)
		}
		admitted++
	}
	for i := int64(0); i < 3; i++ {
		o := out(t)(c.SyncOut(now+10e6+i*1e6, nil))
		if len(o) == 0 {
			break
		}
		rp, err := m.Apply(decodeBatch(t, o), now+10e6+i*1e6)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SyncIn(rp.AppendMsg(nil), now+10e6+i*1e6); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Commit(now + 20e6); err != nil {
		t.Fatal(err)
	}
	ks, err := m.KeyState("a", "k", now+20e6)
	if err != nil {
		t.Fatal(err)
	}
	if ks.Count != admitted {
		t.Errorf("%d admitted, the coordinator counts %d", admitted, ks.Count)
	}
}

// A batch amended with a held request's ask (a host 30 s ahead, a strict
// key: after a clock jump every lease is of a window gone), refused for
// its times, and its amendment refused for its times too: the host tells
// the module so (amendsRefused), and the batch is taken back and cut again
// at the coordinator's time, with the units, the batch's ask and the
// amendment's, and applied: the held requests are admitted by its reply.
// Not taken back (a first version took no amended batch back), it was
// resent as cut and refused until the coordinator's clock caught up, 28 s
// later.
func TestRecallOfABatchWhoseAmendmentsWereRefused(t *testing.T) {
	m, c := retimeIsolate(t, retimeCfg())
	t0 := 100_000*sec + 3*sec
	const ahead = 30 * sec
	am := amendRefused(t, m, c, t0, ahead)
	var r core.Result
	if _, err := m.Apply(decodeBatch(t, am), t0+20e6); !errors.Is(err, merge.ErrClockSkew) {
		t.Fatalf("the amendment: %v, want merge.ErrClockSkew", err)
	}
	c.ClockOffset(-ahead)
	now := t0 + 30e6
	if err := c.Recall(now, false); !errors.Is(err, core.ErrNothingToRecall) {
		t.Fatalf("Recall of an amended batch, its amendment's answer unknown: %v, want ErrNothingToRecall", err)
	}
	if err := c.Recall(now, true); err != nil {
		t.Fatalf("Recall of an amended batch whose amendment was refused for its times: %v", err)
	}
	b := decodeBatch(t, out(t)(c.SyncOut(now, nil)))
	rp, err := m.Apply(b, now)
	if err != nil {
		t.Fatalf("the batch cut again: %v", err)
	}
	if err := c.SyncIn(rp.AppendMsg(nil), now+1e6); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k", "k2"} {
		if err := c.Decide(1, []byte(key), 1, now+2e6, &r); err != nil || !r.Allowed {
			t.Errorf("the request held on s/%s, decided again after the reply: %+v, %v", key, r, err)
		}
	}
	if ks, err := m.KeyState("a", "k", now+3e6); err != nil || ks.Count != 3 {
		t.Errorf("the coordinator counts %+v, %v; want the 3 units of a/k", ks, err)
	}
}

// A key evicted between the cut and the refusal (a full table, a flood of
// new keys): Recall inserts it again with the units the refused batch
// carried, and the batch cut again carries all 3 (dropping them lost them:
// the eviction counted only what no batch carried).
func TestRecallInsertsAnEvictedKeyAgain(t *testing.T) {
	cfg := retimeCfg()
	cfg.MaxKeys = 4
	m, c := retimeIsolate(t, cfg)
	t0 := 100_000*sec + 3*sec
	const ahead = 30 * sec
	var r core.Result
	for i := int64(0); i < 3; i++ {
		if err := c.Decide(0, []byte("k"), 1, t0+ahead+i, &r); err != nil || !r.Allowed {
			t.Fatal(r, err)
		}
	}
	cutRefused(t, m, c, t0+ahead+1e6, t0)
	flood(t, c, 12, 1, t0+ahead+2e6)
	evicted := c.Stats().Evictions
	if evicted == 0 {
		t.Fatal("the flood evicted nothing")
	}
	now := t0 + 10e6
	b2 := recallAt(t, c, -ahead, now)
	sum := int64(0)
	for _, e := range b2.Entries {
		if e.Key == "k" {
			sum += e.Delta
			if e.Window != now/(10*sec) {
				t.Errorf("k's units in window %d, want %d", e.Window, now/(10*sec))
			}
		}
	}
	if sum != 3 {
		t.Errorf("the batch cut again carries %d of k's 3 units", sum)
	}
	if _, err := m.Apply(b2, now); err != nil {
		t.Fatalf("the batch cut again: %v", err)
	}
}

// A graceful stop's last batch (it gives the isolate's leases back) is
// refused for its times: recalled, it is cut again as the last batch,
// naming the strict key it holds a lease on with the unit it admitted
// under it, and the coordinator counts the unit and gives the rest of the
// lease back when it applies it. (Refusing to recall it left the
// batch refused until the coordinator's clock got there, its units
// uncounted and the lease reserved until it expired.)
func TestRecallOfAGracefulStopsLastBatch(t *testing.T) {
	m, c := retimeIsolate(t, retimeCfg())
	t0 := 100_000*sec + 3*sec
	var r core.Result
	if err := c.Decide(1, []byte("k"), 1, t0, &r); err != nil || !r.SyncRetry {
		t.Fatal(r, err)
	}
	rp, err := m.Apply(decodeBatch(t, out(t)(c.SyncOut(t0, nil))), t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Commit(t0); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+1e6); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(1, []byte("k"), 1, t0+2e6, &r); err != nil || !r.Allowed {
		t.Fatalf("under the lease: %+v, %v", r, err)
	}
	const ahead = 3 * sec // the host's clock set forward (within the window), then it stops
	c.Release()
	last := decodeBatch(t, out(t)(c.SyncOut(t0+ahead+3e6, nil)))
	if !last.End {
		t.Fatal("the graceful stop's batch is not the last")
	}
	if _, err := m.Apply(last, t0+3e6); !errors.Is(err, merge.ErrClockSkew) {
		t.Fatalf("the last batch 30 s ahead: %v, want clock skew", err)
	}
	c.ClockOffset(-ahead)
	now := t0 + 4e6
	if err := c.Recall(now, false); err != nil {
		t.Fatalf("recall of the last batch: %v", err)
	}
	again := decodeBatch(t, out(t)(c.SyncOut(now, nil)))
	if !again.End || again.Seq != last.Seq {
		t.Fatalf("cut again: end %v seq %d, want the last batch again (seq %d)", again.End, again.Seq, last.Seq)
	}
	named := false
	for _, d := range again.Entries {
		if d.Limiter == "s" && d.Key == "k" {
			named = d.Delta == 1 || named
		}
	}
	if !named {
		t.Fatalf("the last batch cut again does not report s/k's unit: %+v (the refused one: %+v)", again.Entries, last.Entries)
	}
	if _, err := m.Apply(again, now); err != nil {
		t.Fatal(err)
	}
	if err := m.Commit(now); err != nil {
		t.Fatal(err)
	}
	ks, err := m.KeyState("s", "k", now)
	if err != nil {
		t.Fatal(err)
	}
	if ks.Count != 1 || ks.LeaseSum != 0 {
		t.Errorf("after the last batch: count %d, leases %d; want 1 counted and no lease", ks.Count, ks.LeaseSum)
	}
}

// Recall pins the live entries of the refused batch's keys before it puts
// an evicted one back: with a table of 2 keys, k1 (cut, then evicted by k3)
// needs one slot, and k2, whose entry is live with a unit admitted since
// the cut, must not be that slot (before, it was: its reference bit had
// been cleared by the sweep that evicted k1, and putting it back in turn
// evicted a second key, losing k2's unit).
func TestRecallEvictsNoLiveEntryOfTheBatch(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso", MaxKeys: 2, Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 100, Period: 10 * sec}}}
	m, c := retimeIsolate(t, cfg)
	t0 := 100_000*sec + 3*sec
	const ahead = 3 * sec
	var r core.Result
	dec := func(key string, at int64) {
		t.Helper()
		if err := c.Decide(0, []byte(key), 1, at, &r); err != nil || !r.Allowed {
			t.Fatal(key, r, err)
		}
	}
	dec("k1", t0+ahead)
	dec("k2", t0+ahead+1)
	cutRefused(t, m, c, t0+ahead+1e6, t0)
	dec("k2", t0+ahead+2e6) // k2: 1 in flight, 1 admitted since the cut
	dec("k3", t0+ahead+3e6) // evicts k1 (the sweep clears k2's bit)
	dec("k3", t0+ahead+4e6)
	before := c.Stats()
	b2 := recallAt(t, c, -ahead, t0+10e6)
	after := c.Stats()
	if n := after.Evictions - before.Evictions; n != 1 {
		t.Errorf("Recall evicted %d keys (%d units admitted since the cut lost), want 1: putting k1 back needs one slot",
			n, after.EvictedUnsynced-before.EvictedUnsynced)
	}
	got := map[string]int64{}
	for _, d := range b2.Entries {
		got[d.Key] += d.Delta
	}
	if got["k1"] != 1 || got["k2"] != 2 {
		t.Errorf("the batch cut again carries %v, want k1 1 and k2 2 (its unit since the cut too)", got)
	}
}

// A key of the refused batch that was evicted since the cut and then
// decided again lives in a new entry: Recall pins it too before it puts
// another evicted key of the batch back (3 keys max: kA and kC cut with
// kB; k4 evicts kB, kB back evicts kA). Putting kA back needs one slot,
// k4's; before, it took kB's new entry, losing the unit kB admitted since
// the cut, and putting kB back then evicted a second key.
func TestRecallPinsABatchKeyUsedAgainAfterEviction(t *testing.T) {
	c, err := core.New(wire.Config{Version: wire.Version, IsolateID: "iso", MaxKeys: 3, Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 100, Period: 10 * sec}}})
	if err != nil {
		t.Fatal(err)
	}
	t0 := 100_000*sec + 3*sec
	var r core.Result
	dec := func(key string, at int64) {
		t.Helper()
		if err := c.Decide(0, []byte(key), 1, at, &r); err != nil || !r.Allowed {
			t.Fatal(key, r, err)
		}
	}
	dec("kA", t0)
	dec("kA", t0)
	dec("kB", t0+1)
	dec("kC", t0+2)
	dec("kC", t0+2)
	if b, _ := c.SyncOut(t0+1e6, nil); len(b) == 0 {
		t.Fatal("no batch")
	}
	dec("k4", t0+2e6) // evicts kB
	dec("k4", t0+2e6)
	dec("kB", t0+3e6) // kB again, in a new entry: evicts kA
	before := c.Stats()
	if err := c.Recall(t0+10e6, false); err != nil {
		t.Fatal(err)
	}
	after := c.Stats()
	if n := after.Evictions - before.Evictions; n != 1 {
		t.Errorf("Recall evicted %d keys (%d units admitted since the cut lost), want 1: putting kA back needs one slot",
			n, after.EvictedUnsynced-before.EvictedUnsynced)
	}
	out, err := c.SyncOut(t0+11e6, nil)
	if err != nil || len(out) == 0 {
		t.Fatalf("the batch cut again: %d bytes, %v", len(out), err)
	}
	got := map[string]int64{}
	for _, d := range decodeBatch(t, out).Entries {
		got[d.Key] += d.Delta
	}
	if got["kA"] != 2 || got["kB"] != 2 || got["kC"] != 2 {
		t.Errorf("the batch cut again carries %v, want kA 2, kB 2 (1 cut, 1 since), kC 2", got)
	}
}
