package merge

import (
	"fmt"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// fullViews returns the full-window notices of rp for limiter: views with
// no lease (-1) that say the window is exhausted.
func fullViews(rp *wire.Reply, limiter string) map[string]wire.View {
	out := map[string]wire.View{}
	for _, v := range rp.Entries {
		if v.Limiter == limiter && v.Notice() {
			out[v.Key] = v
		}
	}
	return out
}

// A key-window that counted its limit is told to every isolate with its
// next reply, whatever keys its batch names, once, and only while the
// window lasts; a key of the batch is not told twice (its own view is in
// the reply). An approximate key the same, without a lease.
func TestFullWindowNoticeReachesEveryIsolate(t *testing.T) {
	for _, lim := range []string{"sfw", "fw"} {
		t.Run(lim, func(t *testing.T) {
			c, clk := newTestCoordinator(t, t0, nil)
			W := t0 / sec
			// a fills k: asks for 100 (strict), reports 100 admitted.
			seq := int64(1)
			if lim == "sfw" {
				v := viewOf(t, mustSync(t, c, batch("a", 1, t0, wire.Delta{Limiter: lim, Key: "k", Window: W, Demand: 100})), lim, "k")
				if v.Lease != 100 {
					t.Fatalf("lease %d, want 100", v.Lease)
				}
				seq = 2
			}
			clk.set(t0 + 10e6)
			rp := mustSync(t, c, batch("a", seq, t0+10e6, wire.Delta{Limiter: lim, Key: "k", Window: W, Delta: 100, Demand: 100}))
			if n := fullViews(rp, lim); len(n) != 0 {
				t.Fatalf("a's reply notices its own key again: %+v", n)
			}
			// b's batch names another key only.
			clk.set(t0 + 20e6)
			rp = mustSync(t, c, batch("b", 1, t0+20e6, wire.Delta{Limiter: lim, Key: "other", Window: W, Delta: 1, Demand: 1}))
			v, ok := fullViews(rp, lim)["k"]
			if !ok || v.Window != W || v.Count < 100 {
				t.Fatalf("b's reply: notices %+v; want k full in window %d", fullViews(rp, lim), W)
			}
			// Told once.
			clk.set(t0 + 30e6)
			rp = mustSync(t, c, batch("b", 2, t0+30e6, wire.Delta{Limiter: lim, Key: "other", Window: W, Delta: 1, Demand: 1}))
			if n := fullViews(rp, lim); len(n) != 0 {
				t.Fatalf("b told again: %+v", n)
			}
			// A third isolate, new, hears of it; not in the next window.
			rp = mustSync(t, c, batch("c", 1, t0+30e6, wire.Delta{Limiter: lim, Key: "other", Window: W, Delta: 1, Demand: 1}))
			if _, ok := fullViews(rp, lim)["k"]; !ok {
				t.Fatal("a new isolate was not told")
			}
			clk.set(t0 + sec)
			rp = mustSync(t, c, batch("d", 1, t0+sec, wire.Delta{Limiter: lim, Key: "other", Window: W + 1, Delta: 1, Demand: 1}))
			if n := fullViews(rp, lim); len(n) != 0 {
				t.Fatalf("a window over is told: %+v", n)
			}
		})
	}
}

// Only what cannot come back is noticed: units in a live lease may be
// reported unused, so a window full of reservations is not noticed; once
// the lease expired its units stay spent for the window, and the next
// batch that touches the key notices it. Off with NoFullNotices.
func TestFullWindowNoticeOnlyWhatIsSpent(t *testing.T) {
	const P = 60 * sec
	for _, off := range []bool{false, true} {
		c, clk := newTestCoordinator(t, t0, func(o *testOptions) {
			o.Config = wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
				{Name: "q", Algorithm: wire.FixedWindow, Limit: 10, Period: P, Mode: wire.Strict}}}
			o.Merger.NoFullNotices = off
		})
		W := t0 / P
		at := func(d int64) int64 { clk.set(t0 + d); return t0 + d }
		v := viewOf(t, mustSync(t, c, batch("a", 1, at(0), wire.Delta{Limiter: "q", Key: "k", Window: W, Demand: 10})), "q", "k")
		if v.Lease != 10 {
			t.Fatalf("lease %d, want 10", v.Lease)
		}
		mustSync(t, c, batch("a", 2, at(500e6), wire.Delta{Limiter: "q", Key: "k", Window: W, Delta: 4, Demand: 4}))
		if v := viewOf(t, mustSync(t, c, batch("b", 1, at(sec), wire.Delta{Limiter: "q", Key: "k", Window: W, Demand: 1})), "q", "k"); v.Lease != 0 || !v.Exhausted {
			t.Fatalf("b's ask while a holds 6: %+v; want refused, exhausted", v)
		}
		if n := fullViews(mustSync(t, c, batch("c", 1, at(sec), wire.Delta{Limiter: "q", Key: "x", Window: W, Delta: 1, Demand: 1})), "q"); len(n) != 0 {
			t.Fatalf("reserved, not spent, and noticed: %+v", n)
		}
		// a's lease (1 s life from 0.5 s, 1 s grace) has expired at 3 s:
		// its 6 units stay spent for W. b asks again and is refused.
		mustSync(t, c, batch("b", 2, at(3*sec), wire.Delta{Limiter: "q", Key: "k", Window: W, Demand: 1}))
		n := fullViews(mustSync(t, c, batch("c", 2, at(3*sec), wire.Delta{Limiter: "q", Key: "x", Window: W, Delta: 1, Demand: 1})), "q")
		if off {
			if len(n) != 0 {
				t.Fatalf("NoFullNotices, and noticed: %+v", n)
			}
			continue
		}
		if v, ok := n["k"]; !ok || v.Count != 10 || v.Window != W {
			t.Fatalf("after a's lease expired: notices %+v; want k at 10 (4 counted, 6 spent)", n)
		}
	}
}

// An isolate hears only of the limiters its batches named (a module
// refuses a view of a limiter it does not run). A reset takes the key out
// of the log: an isolate not yet told is not told after it, and the key
// filled again in the same window is logged again.
func TestFullWindowNoticeNamedLimitersAndResets(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	W := t0 / sec
	mustSync(t, c, batch("a", 1, t0, wire.Delta{Limiter: "fw", Key: "k", Window: W, Delta: 100, Demand: 100}))
	if n := fullViews(mustSync(t, c, batch("e", 1, t0, wire.Delta{Limiter: "sw", Key: "x", Window: W, Delta: 1, Demand: 1})), "fw"); len(n) != 0 {
		t.Fatalf("an isolate that never named fw told of it: %+v", n)
	}
	// e names fw: now it hears.
	if _, ok := fullViews(mustSync(t, c, batch("e", 2, t0, wire.Delta{Limiter: "fw", Key: "y", Window: W, Delta: 1, Demand: 1})), "fw")["k"]; !ok {
		t.Fatal("e named fw and was not told")
	}
	// Reset: f, which names fw and was not told yet, is not told after it.
	clk.set(t0 + 10e6)
	c.withMerger(func(m *Merger) {
		if err := m.ResetAt("fw", "k", clk.now()); err != nil {
			t.Fatal(err)
		}
	})
	if n := fullViews(mustSync(t, c, batch("f", 1, t0+10e6, wire.Delta{Limiter: "fw", Key: "z", Window: W, Delta: 1, Demand: 1})), "fw"); len(n) != 0 {
		t.Fatalf("told after the reset: %+v", n)
	}
	// Filled again in the same window: logged and told again.
	mustSync(t, c, batch("a", 2, t0+10e6, wire.Delta{Limiter: "fw", Key: "k", Window: W, Delta: 100, Demand: 100}))
	if _, ok := fullViews(mustSync(t, c, batch("f", 2, t0+10e6, wire.Delta{Limiter: "fw", Key: "z", Window: W, Delta: 1, Demand: 1})), "fw")["k"]; !ok {
		t.Fatal("the key filled again after its reset was not told")
	}
}

// Resets of keys that were never full leave the log alone (a login limiter
// reset on every success must not wipe what isolates are yet to be told),
// and a change of the limits in force empties it with a reset notice of
// every key in it, so the isolates told a window was full drop that.
func TestFullWindowNoticeLogAcrossResetsAndLimitChanges(t *testing.T) {
	var lims *Limits
	c, clk := newTestCoordinator(t, t0, withLimits(&lims))
	W := t0 / sec
	mustSync(t, c, batch("a", 1, t0, wire.Delta{Limiter: "fw", Key: "k", Window: W, Delta: 100, Demand: 100}))
	c.withMerger(func(m *Merger) {
		for i := 0; i < 3*maxFullLog; i++ {
			if err := m.ResetAt("fw", fmt.Sprintf("other-%d", i), clk.now()); err != nil {
				t.Fatal(err)
			}
		}
	})
	rb := mustSync(t, c, batch("b", 1, t0, wire.Delta{Limiter: "fw", Key: "x", Window: W, Delta: 1, Demand: 1}))
	if _, ok := fullViews(rb, "fw")["k"]; !ok {
		t.Fatal("resets of other keys took k's notice away")
	}
	setLimit(t, lims, "fw", "", 200)
	rp := mustSync(t, c, batch("c", 1, t0, wire.Delta{Limiter: "fw", Key: "x", Window: W, Delta: 1, Demand: 1}))
	if n := fullViews(rp, "fw"); len(n) != 0 {
		t.Fatalf("told after the limit was raised: %+v", n)
	}
	// b's next reply lists the resets since the generation its last reply told.
	b2 := batch("b", 2, t0, wire.Delta{Limiter: "fw", Key: "x", Window: W, Delta: 1, Demand: 1})
	b2.ResetGen = rb.ResetGen
	rp = mustSync(t, c, b2)
	found := false
	for _, r := range rp.Resets {
		found = found || r.Limiter == "fw" && r.Key == "k"
	}
	if !found || rp.ResetAll {
		t.Fatalf("b, told k was full, gets no reset notice of k after the limit change: resets %d, all %v", len(rp.Resets), rp.ResetAll)
	}
}
