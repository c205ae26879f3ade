package merge

import (
	"encoding/binary"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A lease whose isolate goes quiet with units left is given back by the
// isolate's next batch naming the key once it was cut after the lease
// was void on the isolate's clock (the module names such a key:
// core's lapses): the units are free for the others at once, and the
// others' views no longer count them as held, instead of both lasting
// until the window ends. A batch cut before the lease was void (the
// isolate could still admit under it) keeps the units reserved, as the
// grace after the coordinator's usable time did before.
func TestLapsedLeaseComesBack(t *testing.T) {
	c, clk, w := tenPerMinute(t)
	reserved := func() int64 {
		t.Helper()
		var r int64
		c.withMerger(func(m *Merger) { _, r, _ = m.Reserved("m10", "k", w, clk.now()) })
		return r
	}
	// Isolate a (and, for the control, d) holds 7 requests and is
	// granted them, admits 3 and reports them within the lease's life.
	grantThenReport := func(iso string) (reportAt, life int64) {
		t.Helper()
		v := viewOf(t, mustSync(t, c, batch(iso, 1, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w, Demand: 7})), "m10", "k")
		if v.Lease < 7 || v.Life <= 0 {
			t.Fatalf("%s granted %d with life %d, want its 7 held requests and a life", iso, v.Lease, v.Life)
		}
		clk.add(sec / 10)
		reportAt = clk.now()
		v = viewOf(t, mustSync(t, c, batch(iso, 2, reportAt, wire.Delta{Limiter: "m10", Key: "k", Window: w, Delta: 3, Demand: 3})), "m10", "k")
		if v.Life <= 0 {
			t.Fatalf("%s's report told life %d, want a life", iso, v.Life)
		}
		return reportAt, v.Life
	}
	at, life := grantThenReport("a")
	if r := reserved(); r < 4 {
		t.Fatalf("a's 4 unused units: reserved %d, want at least 4", r)
	}
	// A batch of a naming the key, cut before a's lease is void on its
	// clock: a may still admit under it, the units stay reserved.
	clk.set(at + life - sec/10)
	mustSync(t, c, batch("a", 3, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w}))
	if r := reserved(); r < 4 {
		t.Fatalf("a batch cut while a's lease lives: reserved %d, want at least the 4 unused", r)
	}
	before := reserved()
	// The next, cut once that lease is void (its life after the cut), and
	// read by the coordinator within the grace after the usable time, when
	// the lease used to count as live: its units come back.
	var nextLife int64
	c.withMerger(func(m *Merger) {
		st := m.keys[string(appendKeyStorageKey(nil, "m10", "k"))]
		is := &st.isos[st.findIso("a")]
		nextLife = is.voidAt - clk.now()
		if m.leaseExpired(is, is.voidAt) {
			t.Fatalf("the coordinator's expiry (%d) is not after the isolate's void time (%d): the test shows nothing", is.expires, is.voidAt)
		}
	})
	// The void time survives the record; a record written before it
	// (no 'v' section) reads as none told.
	c.withMerger(func(m *Merger) {
		st := m.keys[string(appendKeyStorageKey(nil, "m10", "k"))]
		want := st.isos[st.findIso("a")].voidAt
		cp := *st
		cp.unitAsks, cp.askN = 0, 0 // no costs' section: the void times' ends the record
		rec := cp.encode(nil)
		back := newKeyState(st.lim, st.skey)
		if err := back.decode(rec, DefaultMaxIsolatesPerKey); err != nil {
			t.Fatal(err)
		}
		if got := back.isos[back.findIso("a")].voidAt; got != want {
			t.Fatalf("void time %d after a round trip, want %d", got, want)
		}
		i := len(rec) - binary.PutVarint(make([]byte, binary.MaxVarintLen64), want) - 1
		if rec[i] != 'v' || len(st.isos) != 1 {
			t.Fatalf("record %x: no void times' section of one isolate at %d", rec, i)
		}
		old := newKeyState(st.lim, st.skey)
		if err := old.decode(rec[:i], DefaultMaxIsolatesPerKey); err != nil || old.isos[0].voidAt != 0 {
			t.Fatalf("a record without void times: %v, void time %d; want none", err, old.isos[0].voidAt)
		}
	})
	clk.add(nextLife)
	v := viewOf(t, mustSync(t, c, batch("a", 4, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w})), "m10", "k")
	if v.Lease != 0 {
		t.Errorf("a's batch cut after its lease was void: told lease %d, want 0 (it asked for nothing)", v.Lease)
	}
	if r := reserved(); r != 0 {
		t.Errorf("after a's batch cut past its lease: reserved %d (was %d), want 0", r, before)
	}
	vb := viewOf(t, mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w})), "m10", "k")
	if vb.Count != 3 || vb.Held != 0 {
		t.Errorf("b's view: count %d, held %d; want the 3 a admitted and nothing held", vb.Count, vb.Held)
	}
	// Without that batch the lease counts as spent to the window's end:
	// d goes quiet past its expiry.
	clk.add(sec)
	at, life = grantThenReport("d")
	clk.set(at + life + 3*sec) // past the coordinator's expiry (usable + grace)
	if r := reserved(); r < 4 {
		t.Errorf("d, quiet past its lease's expiry: reserved %d, want its 4 unused counted as spent", r)
	}
	vb = viewOf(t, mustSync(t, c, batch("b", 2, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w})), "m10", "k")
	if vb.Held < 4 {
		t.Errorf("b's view with d quiet past its expiry: held %d, want d's 4 unused (it may have spent them)", vb.Held)
	}
}

// The batch that gives a lapsed lease back may ask too (a request held
// after an idle spell, the window otherwise all counted or reserved): it
// is granted from the units it gives back. Before, they were still counted
// as its reservation in that grant and came back only at its next batch
// (a Worker idle past its lease's life on a 20 a day key was refused with
// 2 units of its own left, and admitted 300 ms later).
func TestLapsedLeaseServesItsOwnAsk(t *testing.T) {
	c, clk, w := tenPerMinute(t)
	va := viewOf(t, mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w, Demand: 7})), "m10", "k")
	vb := viewOf(t, mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w, Demand: 10})), "m10", "k")
	if va.Lease+vb.Lease != 10 {
		t.Fatalf("leases a %d, b %d: want the window's 10 all reserved", va.Lease, vb.Lease)
	}
	clk.add(sec / 10)
	used := min(va.Lease, 3)
	va = viewOf(t, mustSync(t, c, batch("a", 2, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w, Delta: used, Demand: used})), "m10", "k")
	if !va.Exhausted {
		t.Fatalf("a's report: %+v, want the window exhausted", va)
	}
	var voidAt int64
	c.withMerger(func(m *Merger) {
		st := m.keys[string(appendKeyStorageKey(nil, "m10", "k"))]
		voidAt = st.isos[st.findIso("a")].voidAt
	})
	clk.set(voidAt + sec/10) // a idle past its lease's life: its batch asks for 2
	va = viewOf(t, mustSync(t, c, batch("a", 3, clk.now(), wire.Delta{Limiter: "m10", Key: "k", Window: w, Demand: 2})), "m10", "k")
	if va.Lease < 2 {
		t.Fatalf("a's ask cut after its lease was void, its unused units given back: lease %d, want its 2", va.Lease)
	}
	var count, reserved int64
	c.withMerger(func(m *Merger) { count, reserved, _ = m.Reserved("m10", "k", w, clk.now()) })
	if count+reserved > 10 {
		t.Fatalf("count %d + reserved %d over the limit of 10", count, reserved)
	}
}
