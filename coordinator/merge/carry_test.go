package merge

import (
	"fmt"
	"math"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A sparse isolate's standing unit for the next window is judged, past
// its own pace, on how often the key's isolates with a request in a
// window have one in the next (carry.go). On two keys with the same load
// in the window of the grant (new isolates asking at a pace over the
// limit, and a sparse isolate asking twice 100 ms apart, whose own pace
// then reads as 1.4 requests per window), the sparse isolate starts the next window
// with a unit where the key's isolates went on asking window after
// window, and without one where they asked once and stopped: there a
// unit held for the next window would most likely go unused, in a window
// its pace fills.
func TestStandingUnitFollowsKeysCarry(t *testing.T) {
	// A strand budget of half a unit (limit 100): one unit held for the
	// next window fits it only if it is expected unused at most half the
	// time.
	c, clk := newTestCoordinator(t, t0, func(o *testOptions) { o.Merger.StrandBudget = 0.005 })
	W := t0 / sec
	seqs := map[string]int64{}
	sync := func(id string, at int64, d wire.Delta) wire.View {
		t.Helper()
		clk.set(at)
		seqs[id]++
		return viewOf(t, mustSync(t, c, batch(id, seqs[id], at, d)), "sfw", d.Key)
	}
	ask := func(id, key string, w, at int64) wire.View {
		t.Helper()
		return sync(id, at, wire.Delta{Limiter: "sfw", Key: key, Window: w, Demand: 1})
	}
	// On "stop", 30 isolates ask once in W and never again; on "carry",
	// 30 ask in W, W+1 and W+2 (as they go on).
	for w := W; w < W+3; w++ {
		for i := 0; i < 30; i++ {
			at := w*sec + int64(i+1)*sec/100
			if w == W {
				ask(fmt.Sprintf("s%d", i), "stop", w, at)
			}
			ask(fmt.Sprintf("c%d", i), "carry", w, at+sec/200)
		}
	}
	// In W+3, 80 isolates ask for 3 each (a pace of 1.5 per window each,
	// new entries' prior: 120 per window in all, over the limit), and
	// the sparse isolate a asks twice. (Asks of at most three units: a
	// sparse isolate's larger ask reads as one costly request, which a
	// unit held ahead does not serve, fitShare.)
	V := W + 3
	for _, key := range []string{"stop", "carry"} {
		for i := int64(0); i < 80; i++ {
			sync(fmt.Sprintf("p%d-%s", i, key), V*sec+sec/20+i*sec/300, wire.Delta{Limiter: "sfw", Key: key, Window: V, Demand: 3})
		}
	}
	var got [2]wire.View
	for i, key := range []string{"stop", "carry"} {
		ask("a-"+key, key, V, V*sec+sec/2)
		got[i] = ask("a-"+key, key, V, V*sec+sec/2+sec/10)
	}
	var q, pace [2]float64
	var lam float64
	c.withMerger(func(m *Merger) {
		for i, key := range []string{"stop", "carry"} {
			st := m.keys[string(appendKeyStorageKey(nil, "sfw", key))]
			q[i] = st.stopShare(V)
			for j := range st.isos {
				pace[i] += st.isos[j].perWindow(sec)
			}
			if i == 0 {
				lam = st.isos[st.findIso("a-stop")].perWindow(sec)
			}
		}
	})
	for i, key := range []string{"stop", "carry"} {
		if pace[i] <= 100 {
			t.Fatalf("%s: the isolates' pace %.1f per window, want over the limit (100)", key, pace[i])
		}
	}
	// 30 stopped (dropped at V's first batch) against 1/2 a stop
	// carried on (observed at W+1 and W+2, halved per window since).
	if want := 30.5 / 31; math.Abs(q[0]-want) > 1e-6 {
		t.Errorf("stop: stop share %v, want %v (30 of 30 stopped)", q[0], want)
	}
	if want := 0.5 / 23.5; math.Abs(q[1]-want) > 1e-6 {
		t.Errorf("carry: stop share %v, want %v (none of 22.5 stopped)", q[1], want)
	}
	if lam < 1.2 {
		t.Fatalf("a's pace %.2f per window, want at least 1.2 (two asks 100 ms apart)", lam)
	}
	if got[1].Stand != 1 {
		t.Errorf("carry: a's standing lease %d, want 1 (the key's isolates go on asking)", got[1].Stand)
	}
	if got[0].Stand != 0 {
		t.Errorf("stop: a's standing lease %d, want 0 (the key's isolates asked once and stopped; its own pace %.2f)", got[0].Stand, lam)
	}
}

// The counts of carry.go: an isolate's next request in the window after
// its last one carries on, a later one or its entry's drop stops; a
// request in the same window or an older one (reported late) observes
// nothing, nor one past the coordinator's next window; the counts halve
// per window.
func TestStopShare(t *testing.T) {
	st := &keyState{lim: &wire.LimiterConfig{Name: "sfw", Algorithm: wire.FixedWindow, Limit: 100, Period: sec}}
	at := func(w int64) int64 { return w*sec + sec/2 }
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if q := st.stopShare(at(100)); !near(q, 0.5) {
		t.Fatalf("no observation: %v, want 1/2", q)
	}
	a, b, c, d := &isoState{}, &isoState{}, &isoState{}, &isoState{}
	st.noteRequest(a, 100, at(100)) // first: nothing to observe
	st.noteRequest(a, 100, at(100)) // the same window
	st.noteRequest(a, 101, at(101)) // carried on
	st.noteRequest(a, 99, at(101))  // late report of an older window
	st.noteRequest(b, 99, at(101))
	st.noteRequest(b, 101, at(101)) // skipped 100: stopped
	st.noteRequest(c, 101, at(101))
	st.noteDropped(c, at(101))           // stopped
	st.noteDropped(&isoState{}, at(101)) // never asked: nothing
	st.noteRequest(d, 101, at(101))
	st.noteRequest(d, 110, at(101))                  // far ahead of the clock: nothing
	if q := st.stopShare(at(101)); !near(q, 2.5/4) { // 2 of 3 stopped
		t.Fatalf("at 101: %v, want %v", q, 2.5/4)
	}
	if q := st.stopShare(at(102)); !near(q, 1.5/2.5) { // halved
		t.Fatalf("at 102: %v, want %v", q, 1.5/2.5)
	}
	if q := st.stopShare(at(200)); !near(q, 0.5) {
		t.Fatalf("at 200: %v, want 1/2 (forgotten)", q)
	}
}

// A batch's observations are made in window order and after prune: the
// module sends a key's current window before the previous one (taken in
// that order, a request in W-2, then W and W-1, read as a stop), and an
// isolate back after two quiet periods is dropped by prune, which counts
// its stop, and its new entry observes nothing more (it counted it twice).
func TestCarryObservedOnceInWindowOrder(t *testing.T) {
	carry := func(c *testCoordinator) (n, stop float32) {
		c.withMerger(func(m *Merger) {
			st := m.keys[keyStorageKey("sfw", "k")]
			n, stop = st.carryN, st.carryStop
		})
		return n, stop
	}
	c, clk := newTestCoordinator(t, t0, nil)
	W := t0/sec + 2
	clk.set((W-2)*sec + 9*sec/10)
	mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: W - 2, Delta: 1, Demand: 1}))
	clk.set(W*sec + sec/2)
	mustSync(t, c, batch("a", 2, clk.now(),
		wire.Delta{Limiter: "sfw", Key: "k", Window: W, Delta: 1, Demand: 2},
		wire.Delta{Limiter: "sfw", Key: "k", Window: W - 1, Delta: 1}))
	if n, stop := carry(c); n != 2 || stop != 0 {
		t.Fatalf("requests in W-2, W-1 and W: %v observations, %v stops; want 2, 0", n, stop)
	}

	c, clk = newTestCoordinator(t, t0, nil)
	W = t0/sec + 3
	clk.set((W - 3) * sec)
	mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: W - 3, Delta: 1, Demand: 1}))
	clk.set(W*sec + sec/2)
	mustSync(t, c, batch("a", 2, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: W, Delta: 1, Demand: 1}))
	if n, stop := carry(c); n != 1 || stop != 1 {
		t.Fatalf("a request in W-3, then in W: %v observations, %v stops; want 1, 1", n, stop)
	}
}

// The stop share floors a standing unit only once the key has observed
// something: its counts are not stored, and a key read again from the
// store (every group on coordinators sharing a Redis Cluster) would
// otherwise count every sparse standing unit half unused by the prior.
func TestStopFloorNeedsAnObservation(t *testing.T) {
	st := &keyState{lim: &wire.LimiterConfig{Name: "sfw", Algorithm: wire.FixedWindow, Limit: 100, Period: sec}}
	at := func(w int64) int64 { return w*sec + sec/2 }
	if f := st.stopFloor(at(100)); f != 0 {
		t.Fatalf("no observation: floor %v, want 0", f)
	}
	a := &isoState{}
	st.noteRequest(a, 100, at(100))
	st.noteRequest(a, 102, at(102)) // skipped 101: stopped
	if f, want := st.stopFloor(at(102)), 1.5/2; f != want {
		t.Fatalf("one stop observed: floor %v, want %v", f, want)
	}
	if f := st.stopFloor(at(103)); f != 0 {
		t.Fatalf("the observation halved to 1/2: floor %v, want 0", f)
	}
}
