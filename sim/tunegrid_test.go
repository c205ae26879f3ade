package sim

import (
	"testing"
	"time"
)

// The tuner scans only intervals within --target-min..--target-max: its
// grid was rounded to the millisecond unclamped, and a scan of 2200us to
// 2400us ran, and could recommend, 2ms. Whole milliseconds stay where they
// fit the range.
func TestTuneGridWithinRange(t *testing.T) {
	us := time.Microsecond
	for _, r := range []struct {
		lo, hi time.Duration
		n      int
	}{{2200 * us, 2400 * us, 12}, {2200 * us, 2400 * us, 2}, {1500 * us, 1700 * us, 5}, {10 * time.Millisecond, 5 * time.Second, 12},
		{3 * time.Millisecond, 3 * time.Millisecond, 4}, {1 * time.Millisecond, 1900 * us, 12}} {
		g := logGrid(r.lo, r.hi, r.n)
		if len(g) == 0 || g[0] != r.lo.Round(time.Millisecond) && g[0] != r.lo || g[len(g)-1] > r.hi {
			t.Errorf("%v..%v (%d points): %v", r.lo, r.hi, r.n, g)
		}
		for i, d := range g {
			if d < r.lo || d > r.hi || i > 0 && d <= g[i-1] {
				t.Errorf("%v..%v (%d points): %v scans %v, outside the range or out of order", r.lo, r.hi, r.n, g, d)
			}
		}
		t.Logf("%v..%v: %v", r.lo, r.hi, g)
	}
	if g := logGrid(10*time.Millisecond, time.Second, 3); len(g) != 3 || g[0] != 10*time.Millisecond || g[1] != 100*time.Millisecond || g[2] != time.Second {
		t.Errorf("10ms..1s in 3 points: %v, want [10ms 100ms 1s]", g)
	}
}
