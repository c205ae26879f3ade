package merge

import (
	"fmt"
	"testing"
)

func TestIsoSketchCounts(t *testing.T) {
	for _, n := range []int{1, 2, 8, 64, 200} {
		var k isoSketch
		for i := 0; i < n; i++ {
			k.add(isoHash(fmt.Sprintf("edge-%d/iso-%d", i/8, i)), 10)
			k.add(isoHash(fmt.Sprintf("edge-%d/iso-%d", i/8, i)), 10) // twice: counted once
		}
		got := k.count(10)
		tol := max(int64(n)/10, 1) // linear counting: within 10% (or one collision) here
		if d := got - int64(n); d > tol || d < -tol {
			t.Errorf("%d isolates counted as %d", n, got)
		}
	}
}

func TestIsoSketchForgetsAfterTwoPeriods(t *testing.T) {
	var k isoSketch
	k.add(isoHash("a"), 10)
	k.add(isoHash("b"), 11)
	if got := k.count(11); got != 2 {
		t.Fatalf("periods 10 and 11: %d isolates, want 2", got)
	}
	if got := k.count(12); got != 1 {
		t.Fatalf("period 12 (b seen in 11): %d, want 1", got)
	}
	if got := k.count(13); got != 0 {
		t.Fatalf("period 13: %d, want 0", got)
	}
	k.add(isoHash("c"), 20) // a gap of periods clears both maps
	if got := k.count(20); got != 1 {
		t.Fatalf("after a gap: %d, want 1", got)
	}
}
