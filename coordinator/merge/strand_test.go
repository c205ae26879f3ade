package merge

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// unusedUnits is E[(r-X)+] for X ~ Poisson(mu): checked against the sum
// over the distribution, and the normal approximation past 64 units
// against the same sum within a unit.
func TestUnusedUnits(t *testing.T) {
	exact := func(r int64, mu float64) float64 {
		var u float64
		p := math.Exp(-mu)
		for k := int64(0); k < r; k++ {
			u += float64(r-k) * p
			p *= mu / float64(k+1)
		}
		return u
	}
	for _, tc := range []struct {
		r  int64
		mu float64
	}{{1, 0.5}, {1, 3}, {2, 1}, {5, 5}, {10, 0.1}, {64, 60}} {
		if got, want := unusedUnits(tc.r, tc.mu, 0), exact(tc.r, tc.mu); math.Abs(got-want) > 1e-9 {
			t.Errorf("unusedUnits(%d, %g) = %g, want %g", tc.r, tc.mu, got, want)
		}
	}
	if got := unusedUnits(1, 0.5, 0); math.Abs(got-math.Exp(-0.5)) > 1e-12 {
		t.Errorf("one unit, mean 0.5: %g unused, want P(X=0) = %g", got, math.Exp(-0.5))
	}
	if got, want := unusedUnits(200, 150, 0), exact(200, 150); math.Abs(got-want) > 1 {
		t.Errorf("unusedUnits(200, 150) = %g, want about %g", got, want)
	}
	if unusedUnits(0, 3, 0) != 0 || unusedUnits(-2, 3, 3) != 0 || unusedUnits(3, 0, 3) != 3 {
		t.Errorf("edges: %g %g %g", unusedUnits(0, 3, 0), unusedUnits(-2, 3, 3), unusedUnits(3, 0, 3))
	}
}

// strandCost is 0 without held units, never more than them, grows with
// them, is about 0 far from the limit and all of them past it.
func TestStrandCost(t *testing.T) {
	if c := strandCost(80, 0, 100); c != 0 {
		t.Errorf("nothing held: cost %g", c)
	}
	prev := 0.0
	for u := 1.0; u <= 40; u++ {
		c := strandCost(80, u, 100)
		if c < prev || c > u {
			t.Fatalf("u=%g: cost %g (previous %g): want non-decreasing and at most u", u, c, prev)
		}
		prev = c
	}
	if c := strandCost(10, 5, 1000); c > 1e-9 {
		t.Errorf("far from the limit: cost %g, want about 0", c)
	}
	if c := strandCost(500, 5, 100); math.Abs(c-5) > 1e-9 {
		t.Errorf("past the limit: cost %g, want every held unit (5)", c)
	}
	if c := strandCost(0, 3, 1); c != 2 {
		t.Errorf("no demand, 3 held in a room of 1: cost %g, want 2", c)
	}
}

// Far from the limit a sparse isolate holds a unit ahead of what it asked
// and one to start the next window with, living into that window; near
// the limit only the strand budget's worth of isolates do; with a
// negative StrandBudget none does. (Each isolate asked once before, at
// ask0: a pace is measured from the second ask on, see
// TestFirstAskHoldsNothingAhead.)
func TestHoldAheadFollowsStrandBudget(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	W := t0 / sec
	at, ask0 := t0+sec/10, t0+sec/20
	// first has isolate id ask for a unit of key at ask0 and report it
	// admitted 10 ms later; ask has it ask for another at at.
	first := func(c *testCoordinator, clk *fakeClock, id, key string) {
		t.Helper()
		clk.set(ask0)
		mustSync(t, c, batch(id, 1, ask0, wire.Delta{Limiter: "sfw", Key: key, Window: W, Demand: 1}))
		clk.set(ask0 + sec/100)
		mustSync(t, c, batch(id, 2, ask0+sec/100, wire.Delta{Limiter: "sfw", Key: key, Window: W, Delta: 1, Demand: 1}))
	}
	ask := func(c *testCoordinator, clk *fakeClock, id, key string) wire.View {
		t.Helper()
		clk.set(at)
		return viewOf(t, mustSync(t, c, batch(id, 3, at, wire.Delta{Limiter: "sfw", Key: key, Window: W, Demand: 1})), "sfw", key)
	}
	for i := 0; i < 8; i++ {
		first(c, clk, fmt.Sprintf("far%d", i), "far")
		first(c, clk, fmt.Sprintf("near%d", i), "near")
	}
	for i := 0; i < 8; i++ {
		v := ask(c, clk, fmt.Sprintf("far%d", i), "far")
		// (A unit or more to start the next window with: more where
		// every isolate could stand with as many, sparseStandUnits.)
		if v.Lease != 2 || v.Stand < 1 {
			t.Fatalf("isolate %d far from the limit: lease %d, stand %d; want 2 (1 asked + 1 ahead) and at least 1", i, v.Lease, v.Stand)
		}
		if want := (W+1)*sec + int64(DefaultLeaseLife) - at; v.Life != want {
			t.Fatalf("isolate %d: life %d, want %d (a lifetime into the next window)", i, v.Life, want)
		}
	}

	// Near the limit: one isolate counted 82 of 100 and goes on at its
	// pace (with the 8 units the sparse isolates admitted, 90); of 8
	// sparse isolates asking now, only the strand budget's worth (1% of
	// 100: a unit expected stranded) holds ahead.
	mustSync(t, c, batch("big", 1, at, wire.Delta{Limiter: "sfw", Key: "near", Window: W, Delta: 82, Demand: 82}))
	ahead := 0
	for i := 0; i < 8; i++ {
		v := ask(c, clk, fmt.Sprintf("near%d", i), "near")
		switch v.Lease {
		case 2:
			ahead++
		case 1:
		default:
			t.Fatalf("isolate %d near the limit: lease %d, want 1 or 2", i, v.Lease)
		}
	}
	if ahead < 1 || ahead > 2 {
		t.Errorf("near the limit %d of 8 sparse isolates held a unit ahead, want 1 or 2", ahead)
	}

	c2, clk2 := newTestCoordinator(t, t0, func(o *testOptions) { o.Merger.StrandBudget = -1 })
	first(c2, clk2, "a", "k")
	v := ask(c2, clk2, "a", "k")
	if v.Lease != 1 || v.Stand != 0 {
		t.Errorf("StrandBudget -1: lease %d, stand %d; want 1 and 0 (nothing ahead)", v.Lease, v.Stand)
	}
}

// A lease asked for at a window's end that reaches the coordinator in the
// next window is granted there (the isolate decides its held request
// again in that window), not answered with nothing, which the isolate
// would take for a dry window.
func TestAskAtWindowEndServedInNext(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) { o.Merger.StrandBudget = -1 })
	W := t0 / sec
	cut := (W+1)*sec - sec/100
	clk.set((W+1)*sec + sec/100)
	v := viewOf(t, mustSync(t, c, batch("a", 1, cut, wire.Delta{Limiter: "sfw", Key: "k", Window: W, Demand: 1})), "sfw", "k")
	if v.Window != W+1 || v.Lease != 1 || v.Exhausted {
		t.Fatalf("view %+v: want window %d, lease 1, not exhausted", v, W+1)
	}
}

// What an isolate holds is spent as it asks (lazily reported) and left
// unused at the window's end only as far as it cannot ask before then:
// an isolate whose lease's life is over (it stopped or died) asks
// nothing more, however much of the window is left, though its units
// stay reserved until the grace ends.
func TestHeldOutlook(t *testing.T) {
	const P = int64(1e9)
	W := int64(10)
	start := W * P
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	// Alive, seen at the window's start, at mid-window: half a window
	// of asking behind it, half ahead.
	live := &isoState{seen: start, usable: start + 5*P}
	sp, un := heldOutlook(live, 1, 2, W, P, start+P/2, 1)
	if !near(sp, 1-math.Exp(-1)) || !near(un, math.Exp(-2)) {
		t.Fatalf("live: spent %v unused %v, want %v and %v", sp, un, 1-math.Exp(-1), math.Exp(-2))
	}
	// Its life ended a quarter into the window: what it did not use by
	// then stays unused, at mid-window and at the end alike.
	dead := &isoState{seen: start, usable: start + P/4, expires: start + 2*P}
	for _, now := range []int64{start + P/2, start + P - 1} {
		sp, un := heldOutlook(dead, 1, 2, W, P, now, 1)
		if !near(sp, 1-math.Exp(-0.5)) || !near(un, math.Exp(-0.5)) {
			t.Fatalf("dead, at %d: spent %v unused %v, want %v and %v", now-start, sp, un, 1-math.Exp(-0.5), math.Exp(-0.5))
		}
	}
	// A record from before lease lifetimes (usable 0) asks until the
	// window ends.
	old := &isoState{seen: start}
	if _, un := heldOutlook(old, 1, 2, W, P, start+P/2, 1); !near(un, math.Exp(-2)) {
		t.Fatalf("no lifetime: unused %v, want %v", un, math.Exp(-2))
	}
}

// A unit an isolate holds is judged from when the coordinator last heard
// from the isolate at all: a later batch of the isolate without the key
// (it syncs for other keys) says it has not used the unit since its last
// batch with the key, since the module puts every key it admitted cost
// in into each batch. A batch cut short at wire.MaxBatchEntries says
// nothing of the keys it left out.
func TestHeldUnitJudgedFromLastHeard(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	W := t0 / sec
	start := W * sec
	at := func(f float64) int64 { return start + int64(f*float64(sec)) }
	// h asks for a unit of k every 100 ms and admits it: a pace of about
	// 10 per window, and a unit held ahead after its last ask.
	seq := int64(0)
	for i, f := range []float64{0.05, 0.15, 0.25, 0.35} {
		clk.set(at(f))
		seq++
		d := wire.Delta{Limiter: "sfw", Key: "k", Window: W, Demand: 1}
		if i > 0 {
			d.Delta = 1
		}
		mustSync(t, c, batch("h", seq, at(f), d))
	}
	var k float64 // the evidence of h's pace (unusedUnits)
	outlook := func(now int64) (r int64, lam, sp, un float64) {
		c.withMerger(func(m *Merger) {
			m.buf = appendKeyStorageKey(m.buf[:0], "sfw", "k")
			st := m.keys[string(m.buf)]
			is := &st.isos[st.findIso("h")]
			r, lam, k = st.reservation(is, W, now), is.perWindow(sec), is.evidence(sec)
			sp, un = heldOutlook(is, r, lam, W, sec, now, 1)
		})
		return
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	now := at(0.9)
	r, lam, sp, un := outlook(now)
	if r < 1 || lam < 1 {
		t.Fatalf("h holds %d at a pace of %.2f per window, want units held and a pace of at least 1", r, lam)
	}
	// Not heard from since its last batch with k: it may have used the
	// unit in the 0.55 s since.
	if want := unusedUnits(r, lam*0.65, k); !near(un, want) {
		t.Fatalf("before any other batch: unused %v, want %v (judged from its last batch with k)", un, want)
	}
	if want := float64(r) - unusedUnits(r, lam*0.55, k); !near(sp, want) {
		t.Fatalf("before any other batch: spent %v, want %v", sp, want)
	}
	// A batch with another key only, at 0.85 s: it used nothing of k by
	// then.
	clk.set(at(0.85))
	seq++
	mustSync(t, c, batch("h", seq, at(0.85), wire.Delta{Limiter: "sfw", Key: "other", Window: W, Demand: 1}))
	_, _, sp, un = outlook(now)
	if want := unusedUnits(r, lam*0.15, k); !near(un, want) {
		t.Fatalf("heard from at 0.85 s without k: unused %v, want %v (judged from then)", un, want)
	}
	if want := float64(r) - unusedUnits(r, lam*0.05, k); !near(sp, want) {
		t.Fatalf("heard from at 0.85 s without k: spent %v, want %v (only since then)", sp, want)
	}
	// A batch cut short (the module left keys for the next batch) at
	// 0.88 s does not say k was unused: the judgement stays from 0.85 s.
	full := make([]wire.Delta, wire.MaxBatchEntries-1)
	for i := range full {
		full[i] = wire.Delta{Limiter: "sfw", Key: fmt.Sprintf("f%d", i), Window: W, Demand: 1}
	}
	clk.set(at(0.88))
	seq++
	mustSync(t, c, batch("h", seq, at(0.88), full...))
	if _, _, _, un2 := outlook(now); !near(un2, un) {
		t.Fatalf("after a full batch: unused %v, want %v (as of the last whole batch)", un2, un)
	}
}

// A new isolate's first ask holds nothing ahead: its pace is then the
// prior of a new entry (half a request per window from one request),
// not a measurement. From its second ask on it holds a unit ahead and
// one to start the next window with. The count of asks is stored with
// the key; a record written before it counts as measured.
func TestFirstAskHoldsNothingAhead(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	W := t0 / sec
	at := t0 + sec/20
	clk.set(at)
	v := viewOf(t, mustSync(t, c, batch("a", 1, at, wire.Delta{Limiter: "sfw", Key: "k", Window: W, Demand: 1})), "sfw", "k")
	if v.Lease != 1 || v.Stand != 0 {
		t.Fatalf("first ask: lease %d, stand %d; want 1 and 0 (nothing ahead)", v.Lease, v.Stand)
	}
	at += sec / 10
	clk.set(at)
	v = viewOf(t, mustSync(t, c, batch("a", 2, at, wire.Delta{Limiter: "sfw", Key: "k", Window: W, Delta: 1, Demand: 2})), "sfw", "k")
	if v.Lease != 2 || v.Stand < 1 {
		t.Fatalf("second ask: lease %d, stand %d; want 2 (1 asked + 1 ahead) and at least 1", v.Lease, v.Stand)
	}

	// The count survives the record: the second ask's isolate is
	// measured after a round trip, a new one is not; a record without
	// the count (written before it) reads as measured.
	var st *keyState
	c.withMerger(func(m *Merger) { st = m.keys[string(appendKeyStorageKey(nil, "sfw", "k"))] })
	st.isos = append(st.isos, isoState{id: "new", seen: at, gap: sec})
	for i := range st.isos {
		st.isos[i].voidAt, st.isos[i].owed = 0, 0 // no void times' or owed section: the count's ends the record
	}
	cp := *st
	cp.unitAsks, cp.askN = 0, 0 // nor a costs' section
	rec := cp.encode(nil)
	back := newKeyState(st.lim, st.skey)
	if err := back.decode(rec, DefaultMaxIsolatesPerKey); err != nil {
		t.Fatal(err)
	}
	if a, n := back.isos[back.findIso("a")].asks, back.isos[back.findIso("new")].asks; a != measuredAsks || n != 0 {
		t.Fatalf("after a round trip: asks %d and %d, want %d and 0", a, n, measuredAsks)
	}
	i := len(rec) - len(st.isos) - 1 // the count's section ends the record (no upstream)
	if rec[i] != 'n' {
		t.Fatalf("record %x: no count section at %d", rec, i)
	}
	old := newKeyState(st.lim, st.skey)
	if err := old.decode(rec[:i], DefaultMaxIsolatesPerKey); err != nil {
		t.Fatal(err)
	}
	for _, is := range old.isos {
		if is.asks != measuredAsks {
			t.Fatalf("record without the count: isolate %s has asks %d, want %d (measured)", is.id, is.asks, measuredAsks)
		}
	}
}

// With a shape k, unusedUnits is E[(r-X)+] for X negative binomial of
// mean mu and shape k (checked against its probabilities from the gamma
// function); it leaves more units unused than a Poisson of the same mean
// and tends to it as k grows.
func TestUnusedUnitsUncertainPace(t *testing.T) {
	exact := func(r int64, mu, k float64) float64 {
		var u float64
		for j := int64(0); j < r; j++ {
			lg1, _ := math.Lgamma(k + float64(j))
			lg2, _ := math.Lgamma(k)
			lg3, _ := math.Lgamma(float64(j) + 1)
			p := math.Exp(lg1 - lg2 - lg3 + k*math.Log(k/(k+mu)) + float64(j)*math.Log(mu/(k+mu)))
			u += float64(r-j) * p
		}
		return u
	}
	for _, tc := range []struct {
		r     int64
		mu, k float64
	}{{1, 0.6, 3}, {1, 2, 3}, {2, 1, 6}, {5, 4, 3}, {10, 0.5, 30}, {64, 50, 9}} {
		got, want := unusedUnits(tc.r, tc.mu, tc.k), exact(tc.r, tc.mu, tc.k)
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("unusedUnits(%d, %g, %g) = %g, want %g", tc.r, tc.mu, tc.k, got, want)
		}
		if p := unusedUnits(tc.r, tc.mu, 0); got <= p {
			t.Errorf("unusedUnits(%d, %g, %g) = %g: want more than the Poisson's %g", tc.r, tc.mu, tc.k, got, p)
		}
	}
	if got, p := unusedUnits(3, 2, 1e7), unusedUnits(3, 2, 0); math.Abs(got-p) > 1e-6 {
		t.Errorf("shape 1e7: %g, want the Poisson's %g", got, p)
	}
	if got, p := unusedUnits(200, 150, 10), unusedUnits(200, 150, 0); got <= p {
		t.Errorf("200 units, mean 150, shape 10: %g unused, want more than the Poisson's %g", got, p)
	}
}

// The pace of an isolate that sends a batch when a request needs one
// rests on a few gaps between its requests: it is uncertain (evidence:
// rateSamples gaps' worth of requests). That of an isolate syncing on
// schedule, four times a window or more, is a count over a set time: a
// Poisson at it stands (0).
func TestPaceEvidence(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	W := t0 / sec
	evidence := func(id string) (k float64) {
		c.withMerger(func(m *Merger) {
			m.buf = appendKeyStorageKey(m.buf[:0], "sfw", "k")
			st := m.keys[string(m.buf)]
			k = st.isos[st.findIso(id)].evidence(sec)
		})
		return
	}
	// sparse: a request every 400 ms, a batch for each; sched: a batch
	// every 100 ms, a request in every fourth.
	for i := int64(0); i < 8; i++ {
		now := W*sec + i*sec/10
		clk.set(now)
		if i%4 == 0 {
			mustSync(t, c, batch("sparse", i/4+1, now, wire.Delta{Limiter: "sfw", Key: "k", Window: W, Demand: 1}))
		}
		d := wire.Delta{Limiter: "sfw", Key: "k", Window: W}
		if i%4 == 0 {
			d.Demand = 1
		}
		mustSync(t, c, batch("sched", i+1, now, d))
	}
	if k := evidence("sparse"); k != rateSamples {
		t.Errorf("an isolate that syncs for its requests: evidence %g, want %d (one request per batch)", k, rateSamples)
	}
	if k := evidence("sched"); k != 0 {
		t.Errorf("an isolate that syncs on schedule: evidence %g, want 0 (Poisson)", k)
	}
}

// A key's request cost is the greatest common divisor of what its batches
// asked for, once unitAsks of them did: 1 before, and for costs without a
// common divisor; asks beyond int32 are left out.
func TestCostUnit(t *testing.T) {
	var st keyState
	for i, ask := range []int64{14, 7, 21} {
		st.noteAsk(ask)
		if st.costUnit() != 1 {
			t.Fatalf("after %d asks: unit %d before unitAsks", i+1, st.costUnit())
		}
	}
	st.noteAsk(0)
	st.noteAsk(1 << 40)
	if st.costUnit() != 1 {
		t.Fatalf("empty and huge asks counted: unit %d", st.costUnit())
	}
	st.noteAsk(28)
	if st.costUnit() != 7 {
		t.Fatalf("asks 14, 7, 21, 28: unit %d, want 7", st.costUnit())
	}
	st.noteAsk(3)
	if st.costUnit() != 1 {
		t.Fatalf("and 3: unit %d, want 1", st.costUnit())
	}
	for range 300 {
		st.noteAsk(1)
	}
	if st.unitAsks != 255 {
		t.Fatalf("unitAsks %d, want 255 (saturated)", st.unitAsks)
	}
	// unusedCost counts whole requests: 7 units of a holder whose
	// requests cost 7 are one request, unused with its chance of none.
	if got, want := unusedCost(7, 7*0.5, 0, 7), 7*math.Exp(-0.5); math.Abs(got-want) > 1e-9 {
		t.Fatalf("unusedCost(7 units, cost 7, 0.5 requests) = %v, want %v", got, want)
	}
	if unusedCost(3, 2, 0, 1) != unusedUnits(3, 2, 0) {
		t.Fatal("unit 1 is not unusedUnits")
	}
}

// A batch that asks for nothing and reports nothing (a peek's, a
// heartbeat's) holds nothing ahead: an isolate whose requests stopped was
// given a unit ahead by each such batch, which expired unused and stayed
// reserved, as spent, for the rest of the window (a 100/day key peeked by
// 16 isolates after a few requests each admitted 84). Such a batch after
// the lease's life now leaves nothing reserved: it reports everything the
// isolate admitted.
func TestPeekHoldsNothingAhead(t *testing.T) {
	const day = 24 * 3600 * sec
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) {
		o.Config = wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
			{Name: "day", Algorithm: wire.FixedWindow, Limit: 100, Period: day, Mode: wire.Strict}}}
	})
	W := t0 / day
	at := t0
	seq := int64(0)
	send := func(d wire.Delta) wire.View {
		t.Helper()
		seq++
		clk.set(at)
		d.Limiter, d.Key, d.Window = "day", "k", W
		return viewOf(t, mustSync(t, c, batch("a", seq, at, d)), "day", "k")
	}
	// Requests 50 ms apart, each asked for and reported: the isolate
	// holds a unit ahead.
	var v wire.View
	for range 4 {
		send(wire.Delta{Demand: 1})
		at += sec / 100
		v = send(wire.Delta{Delta: 1, Demand: 1})
		at += sec / 25
	}
	if v.Lease != 1 {
		t.Fatalf("after 4 requests reported: lease %d, want 1 (a unit ahead)", v.Lease)
	}
	// Its requests stop, and it peeks every 2 s: each peek renews
	// nothing ahead, and one past the life of what it held (a life that
	// the peeks do not carry into the next window) gives it back.
	for range 3 {
		at += 2 * sec
		if v = send(wire.Delta{}); v.Lease > 1 || v.Stand != 0 {
			t.Fatalf("a peek %v after the requests stopped: lease %d, stand %d; want at most the unit it held, and nothing for tomorrow",
				time.Duration(at-t0), v.Lease, v.Stand)
		}
	}
	if v.Lease != 0 {
		t.Errorf("the last peek: lease %d, want 0", v.Lease)
	}
	at += 4 * sec
	clk.set(at)
	ks := getKey(t, c, "day", "k")
	if ks.Count != 4 || ks.LeaseSum != 0 {
		t.Errorf("after the peeks: count %d, %d reserved (%d expired); want 4 and none", ks.Count, ks.LeaseSum, ks.ExpiredLeaseSum)
	}
}
