package merge

import "testing"

// FuzzDecodeShared decodes arbitrary bytes as a shared record (what a
// Redis key holds after its version): it must never panic, and a record it
// accepts re-encodes to a record that decodes to the same state (what is
// persisted of it).
func FuzzDecodeShared(f *testing.F) {
	cfg := testConfig()
	for _, lim := range []int{0, 4} { // fw (approximate, with a sketch), sfw (strict, with isolates)
		st := newKeyState(&cfg.Limiters[lim], "k")
		st.win, st.count, st.prev = 1000, 7, 3
		st.sk.add(12345, 1000)
		if cfg.Limiters[lim].Leased() {
			st.isos = []isoState{{id: "iso-a", seen: 5, lease: 3, granted: 3, leaseWin: 1000, stand: 1, standRes: 2, standUntil: 1001,
				expires: 9, usable: 8, prevRes: 1, voidAt: 7, owed: 2}}
			st.unitAsks, st.unit, st.askN, st.fitCost, st.askCost = 5, 40, 9, 30, 200
		}
		f.Add(lim, encodeShared(nil, st))
	}
	f.Add(0, []byte{0x00})
	f.Add(4, []byte{0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, lim int, rec []byte) {
		l := &cfg.Limiters[(lim%len(cfg.Limiters)+len(cfg.Limiters))%len(cfg.Limiters)]
		st := newKeyState(l, "k")
		if decodeShared(st, rec, 256) != nil {
			return
		}
		again := newKeyState(l, "k")
		if err := decodeShared(again, encodeShared(nil, st), 256); err != nil {
			t.Fatalf("re-encoded record refused: %v", err)
		}
		// Isolates are kept for strict limiters only (as in Pebble records),
		// sketches for approximate ones.
		if again.win != st.win || again.count != st.count || again.prev != st.prev || again.tat != st.tat ||
			(!l.Leased() && again.sk != st.sk) || (l.Leased() && len(again.isos) != len(st.isos)) ||
			(l.Leased() && (again.unitAsks != st.unitAsks || again.unit != st.unit || again.askN != st.askN ||
				again.fitCost != st.fitCost || again.askCost != st.askCost)) {
			t.Fatalf("round trip changed the state: %+v vs %+v", st, again)
		}
		for i := range again.isos {
			if a, b := &again.isos[i], &st.isos[i]; a.prevRes != b.prevRes || a.voidAt != b.voidAt || a.expires != b.expires || a.owed != b.owed {
				t.Fatalf("round trip changed isolate %d: %+v vs %+v", i, b, a)
			}
		}
	})
}
