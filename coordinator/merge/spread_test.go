package merge

import (
	"math"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A leased fixed-window key's spread follows its windows' final counts: a
// key alternating 10 and 190 a window reads as a demand of about 100 with
// a deviation of about 90, not a Poisson count at the isolates' pace;
// before spreadMin windows, and for an approximate key, the pace alone.
// The counts of windows the counter skips read as one empty window.
func TestWindowSpread(t *testing.T) {
	lim := &wire.LimiterConfig{Name: "sfw", Algorithm: wire.FixedWindow, Limit: 200, Period: sec, Mode: wire.Strict}
	st := newKeyState(lim, "k")
	roll := func(count int64) { // window st.win ends with count; the counter moves on
		st.count = count
		st.noteRoll(st.win + 1)
		st.win, st.prev, st.count = st.win+1, st.count, 0
	}
	st.win = 100
	if mu, sd := st.windowDemand(50); mu != 50 || sd != math.Sqrt(50) {
		t.Fatalf("no windows yet: %v, %v; want the pace, 50 and its Poisson deviation", mu, sd)
	}
	for i := 0; i < 64; i++ {
		roll([]int64{10, 190}[i%2])
	}
	mu, sd := st.windowDemand(50)
	if mu < 90 || mu > 110 || sd < 80 || sd > 100 {
		t.Fatalf("alternating 10 and 190: demand %.1f, deviation %.1f; want about 100 and 90", mu, sd)
	}
	mean, _, n := st.spread()
	st.noteRoll(st.win + 5) // four windows skipped: the last two counts and one empty window
	if _, _, n2 := st.spread(); n2 != n+3 {
		t.Fatalf("a skip of four windows added %d observations, want 3", n2-n)
	}
	if m2, _, _ := st.spread(); m2 >= mean {
		t.Fatalf("after empty windows the mean %.1f did not fall from %.1f", m2, mean)
	}
	approx := newKeyState(&wire.LimiterConfig{Name: "fw", Algorithm: wire.FixedWindow, Limit: 200, Period: sec}, "k")
	approx.win = 100
	approx.count = 190
	approx.noteRoll(102)
	if _, _, n := approx.spread(); n != 0 {
		t.Fatalf("an approximate key noted %d windows; its sketch is the isolates'", n)
	}
}
