package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// tenPerMinute returns a coordinator with one limiter, m10 (strict fixed
// window, 10 a minute), its clock a second into a minute, and that
// minute's window.
func tenPerMinute(t *testing.T) (*testCoordinator, *fakeClock, int64) {
	t.Helper()
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) {
		o.Config = wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
			{Name: "m10", Algorithm: wire.FixedWindow, Limit: 10, Period: 60 * sec, Mode: wire.Strict}}}
	})
	clk.set((t0/(60*sec)+1)*60*sec + sec)
	return c, clk, clk.now() / (60 * sec)
}

// A view told to a batch that reads it (wire.Batch.Pace) carries the other
// isolates' pace: the cost per period they are expected to admit, from
// what they asked per batch over their gap (here a steady 5 per 100 ms:
// 50 a second); the isolate's own is not in it, and a batch that does not
// say Pace gets none (its module reads views of at most 14 elements).
func TestViewTellsTheOthersPace(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) {
		o.Config = wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
			{Name: "s", Algorithm: wire.FixedWindow, Limit: 100000, Period: sec, Mode: wire.Strict}}}
	})
	var seq int64
	for i := 0; i < 20; i++ {
		clk.add(sec / 10)
		seq++
		w := clk.now() / sec
		mustSync(t, c, batch("a", seq, clk.now(), wire.Delta{Limiter: "s", Key: "k", Window: w, Delta: 5, Demand: 5}))
	}
	clk.add(sec / 100)
	w := clk.now() / sec
	b := batch("b", 1, clk.now(), wire.Delta{Limiter: "s", Key: "k", Window: w, Delta: 1, Demand: 1})
	if v := viewOf(t, mustSync(t, c, b), "s", "k"); v.Pace != 0 {
		t.Errorf("a batch that does not read the pace was told %d", v.Pace)
	}
	b = batch("b", 2, clk.now(), wire.Delta{Limiter: "s", Key: "k", Window: w})
	b.Pace = true
	if v := viewOf(t, mustSync(t, c, b), "s", "k"); v.Pace < 45 || v.Pace > 55 {
		t.Errorf("b told the others' pace %d a second, want a's 50 (within 10%%)", v.Pace)
	}
	clk.add(sec / 100)
	a := batch("a", seq+1, clk.now(), wire.Delta{Limiter: "s", Key: "k", Window: w})
	a.Pace = true
	if v := viewOf(t, mustSync(t, c, a), "s", "k"); v.Pace > 5 {
		t.Errorf("a told the others' pace %d a second, want b's (a request or so), not its own 50", v.Pace)
	}
}
