package limitmath

import (
	"math"
	"testing"
)

func TestRollAndCounts(t *testing.T) {
	for _, tc := range []struct {
		win, cur, prev, w int64
		rWin, rCur, rPrev int64
		cW, pW            int64
	}{
		{10, 5, 3, 10, 10, 5, 3, 5, 3},
		{10, 5, 3, 11, 11, 0, 5, 0, 5},
		{10, 5, 3, 12, 12, 0, 0, 0, 0},
		{10, 5, 3, 9, 10, 5, 3, 3, 0}, // a window behind: nothing moves back; its count is prev
		{10, 5, 3, 7, 10, 5, 3, 0, 0},
	} {
		w, c, p := Roll(tc.win, tc.cur, tc.prev, tc.w)
		if w != tc.rWin || c != tc.rCur || p != tc.rPrev {
			t.Errorf("Roll(%d,%d,%d -> %d) = %d,%d,%d", tc.win, tc.cur, tc.prev, tc.w, w, c, p)
		}
		if c, p := Counts(tc.win, tc.cur, tc.prev, tc.w); c != tc.cW || p != tc.pW {
			t.Errorf("Counts(%d,%d,%d at %d) = %d,%d, want %d,%d", tc.win, tc.cur, tc.prev, tc.w, c, p, tc.cW, tc.pW)
		}
	}
	// What Roll leaves is what Counts reads in the new window.
	for w := int64(10); w < 14; w++ {
		rw, c, p := Roll(10, 5, 3, w)
		if gc, gp := Counts(10, 5, 3, w); gc != c || gp != p || rw != w {
			t.Errorf("at %d: Roll gives %d,%d; Counts %d,%d", w, c, p, gc, gp)
		}
	}
}

func TestAdvanceTAT(t *testing.T) {
	if got := AdvanceTAT(0, 1000, 2, 1e9, 10); got != 1000+2e8 {
		t.Fatalf("from an empty bucket: %d", got)
	}
	if got := AdvanceTAT(5e9, 1000, 1, 1e9, 10); got != 5e9+1e8 {
		t.Fatalf("behind a TAT in the future: %d", got)
	}
	if got := AdvanceTAT(math.MaxInt64-5, 0, 1<<40, 31*24*3600*1e9, 1); got != math.MaxInt64 {
		t.Fatalf("saturates: %d", got)
	}
	if Window(1999, 1000) != 1 || Window(2000, 1000) != 2 {
		t.Fatal("window index")
	}
}
