package merge

import (
	"math"
	"testing"
)

// TestRecordSectionsReadSane: a key record's optional sections of what a
// grant was for ('o') and of its requests' cost ('c') round-trip, and a
// record holding values the coordinator never writes reads as none of
// them rather than as an absurd state: infinite costs made the fit share
// NaN and the held units told in views absurd (every module refused the
// reply, for every isolate of the key, and the next write kept them); a
// negative owed inflated the isolate's demand.
func TestRecordSectionsReadSane(t *testing.T) {
	cfg := testConfig()
	lim := &cfg.Limiters[4] // sfw: strict fixed window
	record := func(owed int64, fit, ask float32) *keyState {
		st := newKeyState(lim, "k")
		st.win, st.count = 1000, 7
		st.isos = []isoState{{id: "a", lease: 3, granted: 3, leaseWin: 1000, owed: owed}}
		st.unitAsks, st.unit, st.askN, st.fitCost, st.askCost = 5, 40, 9, fit, ask
		back := newKeyState(lim, "k")
		if err := back.decode(st.encode(nil), DefaultMaxIsolatesPerKey); err != nil {
			t.Fatal(err)
		}
		return back
	}
	if st := record(2, 30, 200); st.isos[0].owed != 2 || st.unitAsks != 5 || st.unit != 40 || st.askN != 9 || st.fitCost != 30 || st.askCost != 200 {
		t.Fatalf("round trip: owed %d, costs %d %d %d %v %v", st.isos[0].owed, st.unitAsks, st.unit, st.askN, st.fitCost, st.askCost)
	}
	inf := float32(math.Inf(1))
	for _, c := range [][2]float32{{inf, inf}, {1, inf}, {float32(math.NaN()), 5}, {-1, 5}, {50, 5}} {
		st := record(0, c[0], c[1])
		if st.askN != 0 || st.fitCost != 0 || st.askCost != 0 || math.IsNaN(st.fitShare()) || st.fitShare() != 1 {
			t.Errorf("costs %v read as askN %d, %v / %v, fit share %v; want none (share 1)", c, st.askN, st.fitCost, st.askCost, st.fitShare())
		}
		if st.unit != 40 {
			t.Errorf("costs %v: the unit (%d) went with them", c, st.unit)
		}
	}
	if st := record(-1<<40, 30, 200); st.isos[0].owed != 0 {
		t.Errorf("a negative owed read as %d, want 0", st.isos[0].owed)
	}
}
