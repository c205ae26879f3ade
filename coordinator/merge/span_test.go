package merge

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// spanIsolate plays one module's side of a strict fixed-window key, as
// wasm/core does: a lease for one window, a standing lease for each window
// after it through standTo (wire.View.StandTo), both void past the life.
type spanIsolate struct {
	id             string
	seq            int64
	n, win         int64 // what it may still admit in window win
	stand, standTo int64
	standFrom      int64 // the window of the reply that told the standing lease
	expires        int64 // 0: never
	pending        map[int64]int64
	dead           bool
	spans          bool // it says it reads StandTo (wire.Batch.Spans)
}

// TestStandingUnitsOverSeveralWindows runs sparse isolates (a request every
// few windows each) against a strict 100/s key, far under the limit, then
// at three times it, then far under again, with a fifth of the isolates
// killed holding what they hold. Isolates that read View.StandTo are
// given standing units over several windows where the key is far from its
// limit, and decide their next request locally some windows later; no
// window admits more than the limit, whatever the isolates held. Isolates
// that do not say they read StandTo (an older module) are never told one.
func TestStandingUnitsOverSeveralWindows(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		told, far, local, asked, admitted := runSpanFleet(t, true, seed)
		_, oldFar, oldLocal, oldAsked, oldAdmitted := runSpanFleet(t, false, seed)
		t.Logf("seed %d: reading StandTo: %d admitted, %d locally (%d on a unit two or more windows after the reply that gave it), %d asks, %d views with StandTo; older module: %d admitted, %d locally, %d asks",
			seed, admitted, local, far, asked, told, oldAdmitted, oldLocal, oldAsked)
		if oldFar != 0 {
			t.Fatalf("seed %d: an older module admitted %d on units two or more windows on, want none", seed, oldFar)
		}
		if told == 0 || far == 0 || local < 2*oldLocal {
			t.Fatalf("seed %d: %d views with StandTo, %d local decisions (%d two or more windows on) against an older module's %d: want sparse isolates to stand over several windows far from the limit, and at least twice the local decisions",
				seed, told, local, far, oldLocal)
		}
	}
}

// runSpanFleet runs the fleet of TestStandingUnitsOverSeveralWindows with
// seed and returns how many views told StandTo past the next window,
// admissions on a standing unit two or more windows after the reply that
// gave it, local admissions, asks, and admissions. It fails t on any
// window over the limit.
func runSpanFleet(t *testing.T, spans bool, seed uint64) (told, farLocal, local, asked, admitted int64) {
	c, clk := newTestCoordinator(t, t0, nil)
	rng := rand.New(rand.NewPCG(seed, 99))
	const isolates, limit, step = 80, 100, sec / 100
	isos := make([]*spanIsolate, isolates)
	for i := range isos {
		isos[i] = &spanIsolate{id: "sp-" + string(rune('A'+i%26)) + string(rune('a'+i/26)), pending: map[int64]int64{}, spans: spans}
	}
	perWindow := map[int64]int64{}
	sync := func(is *spanIsolate, now, ask int64) *wire.View {
		w := now / sec
		var entries []wire.Delta
		for win, d := range is.pending {
			if win != w {
				entries = append(entries, wire.Delta{Limiter: "sfw", Key: "k", Window: win, Delta: d, Demand: d})
			}
		}
		entries = append(entries, wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: is.pending[w], Demand: is.pending[w] + ask})
		is.seq++
		b := batch(is.id, is.seq, now, entries...)
		b.Spans = is.spans
		rp := mustSync(t, c, b)
		checkLeaseInvariant(t, c)
		clear(is.pending)
		for i := range rp.Entries {
			if v := &rp.Entries[i]; v.Window == w {
				is.n, is.win, is.stand, is.standTo, is.standFrom = v.Lease, w, v.Stand, max(v.StandTo, w+1), w
				is.expires = 0
				if v.Life != 0 {
					is.expires = now + v.Life
				}
				if v.StandTo > w+1 {
					told++
				}
				return v
			}
		}
		t.Fatalf("no view of window %d", w)
		return nil
	}
	admit := func(is *spanIsolate, w int64) {
		is.pending[w]++
		perWindow[w]++
		admitted++
		if perWindow[w] > limit {
			t.Fatalf("window %d admitted %d > limit %d", w-t0/sec, perWindow[w], limit)
		}
	}
	end := t0 + 40*sec
	for now := clk.now(); now < end; now = clk.add(step) {
		w := now / sec
		rate := 0.25 // requests per isolate per second: 20/s, a fifth of the limit
		if now >= t0+15*sec && now < t0+20*sec {
			rate = 4 // 320/s
		}
		if now == t0+20*sec {
			for _, is := range isos[:isolates/5] {
				is.dead = true // killed with what it holds
			}
		}
		for _, is := range isos {
			if is.dead || rng.Float64() >= rate*float64(step)/float64(sec) {
				continue
			}
			if is.expires != 0 && now >= is.expires {
				is.n, is.stand = 0, 0
			}
			switch {
			case is.win == w && is.n > 0:
				is.n--
				local++
				admit(is, w)
			case is.win < w && w <= is.standTo && is.stand > 0:
				is.win, is.n = w, is.stand-1
				local++
				if w >= is.standFrom+2 {
					farLocal++
				}
				admit(is, w)
			default:
				asked++
				if v := sync(is, now, 1); v.Lease >= 1 {
					is.n = v.Lease - 1
					admit(is, w)
				}
				continue
			}
			if rng.IntN(2) == 0 { // reported at once, or with the next batch
				sync(is, now, 0)
			}
		}
	}
	return told, farLocal, local, asked, admitted
}

// Isolates back together after a silence longer than two periods (kept:
// keepFor) hold nothing ahead on their first batch back: four that filled
// a key of 6 a second, idle 2.5 s, then each with one request at once, are
// each granted their request. Holding a unit ahead on the pace each had
// before the silence, three took two units each and the fourth found the
// window all reserved (edge/js/test/workerd-idle.test.js in workerd).
func TestBackFromSilenceHoldsNothingAhead(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) {
		o.Config = wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
			{Name: "s6", Algorithm: wire.FixedWindow, Limit: 6, Period: sec, Mode: wire.Strict}}}
	})
	ids := []string{"w-a", "w-b", "w-c", "w-d"}
	seq := map[string]int64{}
	owed := map[string]int64{} // admitted, to report with the next batch
	ask := func(id string, now int64) wire.View {
		t.Helper()
		seq[id]++
		b := batch(id, seq[id], now, wire.Delta{Limiter: "s6", Key: "k", Window: now / sec, Delta: owed[id], Demand: owed[id] + 1})
		b.Spans = true
		owed[id] = 0
		rp := mustSync(t, c, b)
		v := viewOf(t, rp, "s6", "k")
		if v.Lease >= 1 {
			owed[id] = 1
		}
		return v
	}
	clk.set(t0/sec*sec + 10*sec + sec/5)
	for round := 0; round < 5; round++ { // 20 requests against 6: the window fills
		for _, id := range ids {
			ask(id, clk.add(sec/100))
		}
	}
	clk.add(2500 * sec / 1000)
	for _, id := range ids {
		if v := ask(id, clk.add(sec/1000)); v.Lease < 1 {
			t.Fatalf("%s, back after 2.5 s with one request in a window of 6: granted %d (exhausted %v), want its request", id, v.Lease, v.Exhausted)
		}
	}
}

// A sparse isolate's span reaches as far as its pace asks while the key is
// far from its limit, however many units stand there: 80 isolates with a
// request every 4 s each (20/s against a strict 100/s) are told spans of
// about 8 windows (two requests) with about 75 units standing in each
// window, most of them unused. Spans were cut at the window after next
// once about half the limit stood there: the strand check took the
// standing units off the room as well as counting the unused ones.
func TestSpansReachPastHalfTheLimitStanding(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	const isolates, every = 80, 4 * sec
	start := (t0/sec + 1) * sec
	seq := map[int]int64{}
	standTo := map[int]int64{} // the last window each isolate stands in, as told
	var asks, long, standing int64
	for k := int64(0); k < 6; k++ {
		for i := range isolates {
			now := start + k*every + int64(i)*every/isolates + sec/10
			clk.set(now)
			w := now / sec
			seq[i]++
			b := batch(fmt.Sprintf("sp-%d", i), seq[i], now, wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 1})
			b.Spans = true
			v := viewOf(t, mustSync(t, c, b), "sfw", "k")
			checkLeaseInvariant(t, c)
			if v.Lease < 1 {
				t.Fatalf("isolate %d at %v: granted %d, want its request (20/s against 100/s)", i, now-t0, v.Lease)
			}
			if k >= 3 { // paces measured, spans formed
				asks++
				for j, to := range standTo {
					if j != i && to >= w+2 {
						standing++
					}
				}
				if v.StandTo >= w+5 {
					long++
				}
			}
			standTo[i] = max(v.StandTo, w+1)
		}
	}
	t.Logf("%d of %d asks told a span of 5 windows or more; %.1f other isolates standing in the window after next, on average", long, asks, float64(standing)/float64(asks))
	if long*10 < asks*9 {
		t.Fatalf("%d of %d asks told a span of 5 windows or more, want at least 90%%", long, asks)
	}
	if standing < asks*45 {
		t.Fatalf("%.1f isolates standing on average, want at least 45 (the case this test is for)", float64(standing)/float64(asks))
	}
}

// Every sparse isolate killed while its span stands (kill -9 of every
// host) strands one unit per dead isolate in each window until the span
// ends, at most wire.MaxStandWindows lease lives: 16 isolates at a request
// every 3 s on a strict 20/s key, then all killed at once and 8 new ones
// at twice the limit. No window passes the limit; the new isolates are
// short by at most the dead isolates' units in a window, and get the whole
// limit once the spans have ended.
func TestKilledSpanHoldersStrandUntilTheirSpansEnd(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) {
		o.Config = wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
			{Name: "s20", Algorithm: wire.FixedWindow, Limit: 20, Period: sec, Mode: wire.Strict}}}
	})
	const limit, dead, fresh, step = 20, 16, 8, sec / 100
	life := int64(DefaultLeaseLife)
	type iso struct {
		id      string
		seq     int64
		n, win  int64
		stand   int64
		standTo int64
		expires int64
		pending map[int64]int64 // admitted per window, to report with the next batch
	}
	perWindow := map[int64]int64{}
	ask := func(is *iso, now int64, want int64) {
		w := now / sec
		is.seq++
		var ds []wire.Delta
		for win, d := range is.pending {
			if win != w {
				ds = append(ds, wire.Delta{Limiter: "s20", Key: "k", Window: win, Delta: d, Demand: d})
			}
		}
		ds = append(ds, wire.Delta{Limiter: "s20", Key: "k", Window: w, Delta: is.pending[w], Demand: is.pending[w] + want})
		b := batch(is.id, is.seq, now, ds...)
		b.Spans = true
		clear(is.pending)
		v := viewOf(t, mustSync(t, c, b), "s20", "k")
		checkLeaseInvariant(t, c)
		is.n, is.win, is.stand, is.standTo, is.expires = v.Lease, w, v.Stand, max(v.StandTo, w+1), now+v.Life
	}
	decide := func(is *iso, now int64) bool {
		w := now / sec
		if now >= is.expires {
			is.n, is.stand = 0, 0
		}
		if is.win < w && w <= is.standTo && is.stand > 0 {
			is.win, is.n = w, is.stand
		}
		if is.win != w || is.n == 0 {
			ask(is, now, 1)
		}
		if is.win == w && is.n > 0 {
			is.n--
			is.pending[w]++
			perWindow[w]++
			if perWindow[w] > limit {
				t.Fatalf("window %d admitted %d > %d", w-t0/sec, perWindow[w], limit)
			}
			return true
		}
		return false
	}
	rng := rand.New(rand.NewPCG(7, 7))
	olds := make([]*iso, dead)
	for i := range olds {
		olds[i] = &iso{id: fmt.Sprintf("old-%d", i), pending: map[int64]int64{}}
	}
	kill := (t0/sec + 30) * sec
	for now := clk.now(); now < kill; now = clk.add(step) {
		for _, is := range olds {
			if rng.Float64() < float64(step)/float64(3*sec) {
				decide(is, now)
			}
		}
	}
	standing := 0 // dead isolates whose span reaches two windows on
	for _, is := range olds {
		if is.standTo >= kill/sec+2 && is.stand > 0 {
			standing++
		}
	}
	news := make([]*iso, fresh)
	for i := range news {
		news[i] = &iso{id: fmt.Sprintf("new-%d", i), pending: map[int64]int64{}}
	}
	end := kill + 20*sec
	for now := clk.now(); now < end; now = clk.add(step) {
		for _, is := range news {
			if rng.Float64() < 2*limit/float64(fresh)*float64(step)/float64(sec) {
				decide(is, now)
			}
		}
	}
	full := int64(-1) // the first window after which every window admitted the limit
	var stranded int64
	var got []int64
	for w := kill / sec; w < end/sec; w++ {
		got = append(got, perWindow[w])
		stranded += limit - perWindow[w]
		if short := limit - perWindow[w]; short > dead {
			t.Fatalf("window %d after the kill: %d of %d admitted, short by more than the %d dead isolates", w-kill/sec, perWindow[w], limit, dead)
		}
		if perWindow[w] < limit {
			full = -1
		} else if full < 0 {
			full = w - kill/sec
		}
	}
	t.Logf("%d of %d dead isolates stood past the next window; admitted per window after the kill %v: the limit from window %d (%d s), %d units stranded", standing, dead, got, full, full, stranded)
	if standing == 0 {
		t.Fatal("no dead isolate held a span: not the case this test is for")
	}
	if full < 0 || full*sec > wire.MaxStandWindows*life+sec {
		t.Fatalf("the new isolates got the whole limit from window %d after the kill, want within %d lease lives", full, wire.MaxStandWindows)
	}
}
