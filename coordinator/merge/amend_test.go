package merge

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestAmendmentGrantsWhatIsFree: an amendment of an applied batch raises
// the isolate's lease (from the batch's cut on) to its asks as far as the
// window has budget free (a key of the batch and a key it did not name);
// resent, or older than the last, it changes nothing.
func TestAmendmentGrantsWhatIsFree(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	clk.set((t0/sec + 1) * sec)
	w := clk.now() / sec
	// b fills the window but for 5 units (sfw: 100/s).
	mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 95, Demand: 95}))
	b1 := batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 1})
	v := viewOf(t, mustSync(t, c, b1), "sfw", "k")
	first := v.Lease
	if first < 1 {
		t.Fatalf("lease %d, want >= 1", first)
	}
	clk.add(sec / 100)
	am := amend(b1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: first + 2}, wire.Ask{Limiter: "sfw", Key: "other", Window: w, Cost: 3})
	rp := mustSync(t, c, am)
	free := 100 - 95 - first - isoOf(t, c, "sfw", "k", "b").lease // what b holds ahead is reserved
	if got, want := viewOf(t, rp, "sfw", "k").Lease, first+min(2, free); got != want {
		t.Fatalf("lease of k after the amendment: %d, want %d (%d before, %d free)", got, want, first, free)
	}
	if got := viewOf(t, rp, "sfw", "other").Lease; got != 3 {
		t.Fatalf("lease of a key only the amendment names: %d, want 3", got)
	}
	checkLeaseInvariant(t, c)
	// Resent (the host's retry): nothing more.
	rp = mustSync(t, c, am)
	if got, want := viewOf(t, rp, "sfw", "k").Lease, first+min(2, free); got != want {
		t.Fatalf("lease of k after the amendment was resent: %d, want %d", got, want)
	}
	if is := isoOf(t, c, "sfw", "k", "a"); is.lease != first+min(2, free) {
		t.Fatalf("reserved for a: %d, want %d", is.lease, first+min(2, free))
	}
	// An older amendment arriving late asks for nothing.
	rp = mustSync(t, c, amend(b1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: first + 1}))
	if got, want := viewOf(t, rp, "sfw", "k").Lease, first+min(2, free); got != want {
		t.Fatalf("lease of k after a late amendment: %d, want %d", got, want)
	}
	// An ask for more than is left gets what is left (nothing on the key
	// says its requests are costly: fitShare; else a sparse isolate's
	// large ask would read as one request, oneRequest).
	rp = mustSync(t, c, amend(b1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: first + 50}))
	if got, want := viewOf(t, rp, "sfw", "k").Lease, first+free; got != want {
		t.Fatalf("lease of k when the window has %d free: %d, want %d", free, got, want)
	}
	checkLeaseInvariant(t, c)
	if s := c.m.Stats(); s.Amendments != 4 || s.AsksGranted != free+3 {
		t.Fatalf("stats: %d amendments, %d granted", s.Amendments, s.AsksGranted)
	}
}

// TestAmendmentBeforeItsBatch: an amendment that reaches the coordinator
// before its batch (or whose batch was lost) is applied as the batch, its
// asks part of the demand; the batch arriving after it is a retry.
func TestAmendmentBeforeItsBatch(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	clk.set((t0/sec + 1) * sec)
	w := clk.now() / sec
	b1 := batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Delta: 1, Demand: 1})
	rp := mustSync(t, c, amend(b1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: 2}))
	v := viewOf(t, rp, "sfw", "k")
	if v.Count != 1 || v.Lease < 2 {
		t.Fatalf("count %d, lease %d; want 1 and >= 2 (the asks are unmet demand)", v.Count, v.Lease)
	}
	rp = mustSync(t, c, b1)
	if v2 := viewOf(t, rp, "sfw", "k"); v2.Count != 1 || v2.Lease != v.Lease {
		t.Fatalf("the batch after its amendment: count %d, lease %d; want 1 and %d", v2.Count, v2.Lease, v.Lease)
	}
	checkLeaseInvariant(t, c)
}

// TestAmendmentBadAsks: asks naming an unknown limiter are refused whole;
// asks of limiters that take none (approximate) are ignored.
func TestAmendmentBadAsks(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	w := clk.now() / sec
	b1 := batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 1})
	if _, err := c.Sync(context.Background(), amend(b1, wire.Ask{Limiter: "nope", Key: "k", Window: w, Cost: 1})); err == nil {
		t.Fatal("an ask of an unknown limiter was taken")
	}
	if _, err := c.Sync(context.Background(), amend(b1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: 0})); err == nil {
		t.Fatal("an ask of cost 0 was taken")
	}
	rp := mustSync(t, c, amend(b1, wire.Ask{Limiter: "fw", Key: "x", Window: w, Cost: 1}))
	for _, v := range rp.Entries {
		if v.Key == "x" {
			t.Fatalf("an approximate limiter's ask got a view: %+v", v)
		}
	}
}

// TestHeldRequestAtWindowEndStands: a batch whose reply reaches the isolate
// after the window ends (it took as long to come) gets a standing lease
// for the next window for the requests it holds, which the isolate then
// decides there; one answered well within the window does not (a sparse
// isolate gets at most a unit ahead there).
func TestHeldRequestAtWindowEndStands(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	w := t0/sec + 1
	clk.set((w+1)*sec - 10e6) // 10 ms before the window ends
	late := batch("a", 1, clk.now()-30e6, wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 2})
	if v := viewOf(t, mustSync(t, c, late), "sfw", "k"); v.Stand < 2 {
		t.Fatalf("stand %d for the next window, want >= 2 (the reply lands after the window ends)", v.Stand)
	}
	checkLeaseInvariant(t, c)
	clk.set((w+1)*sec + 300e6) // early in the next window
	early := batch("b", 1, clk.now()-30e6, wire.Delta{Limiter: "sfw", Key: "k", Window: w + 1, Demand: 2})
	if v := viewOf(t, mustSync(t, c, early), "sfw", "k"); v.Stand >= 2 {
		t.Fatalf("stand %d, want < 2 (the reply lands well within the window: at most a unit ahead)", v.Stand)
	}
}

// TestAmendmentAfterADryReply: a key the batch asked for and its reply
// granted nothing for gets nothing from the amendment either, even once budget is
// free again (the isolate took that reply and denies there for a dry
// spell: units granted now would go unused); a key only the amendment
// names is served.
func TestAmendmentAfterADryReply(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	clk.set((t0/sec + 1) * sec)
	w := clk.now() / sec
	if v := viewOf(t, mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 100})), "sfw", "k"); v.Lease != 100 {
		t.Fatalf("b's lease %d, want the whole window", v.Lease)
	}
	b1 := batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w, Demand: 1})
	if v := viewOf(t, mustSync(t, c, b1), "sfw", "k"); v.Lease != 0 {
		t.Fatalf("a's lease %d with the window reserved, want 0", v.Lease)
	}
	// b stops gracefully: its reservation comes back.
	end := batch("b", 2, clk.now(), wire.Delta{Limiter: "sfw", Key: "k", Window: w})
	end.End = true
	mustSync(t, c, end)
	rp := mustSync(t, c, amend(b1, wire.Ask{Limiter: "sfw", Key: "k", Window: w, Cost: 2}, wire.Ask{Limiter: "sfw", Key: "x", Window: w, Cost: 1}))
	if v := viewOf(t, rp, "sfw", "k"); v.Lease != 0 {
		t.Fatalf("k after a dry reply: lease %d, want 0", v.Lease)
	}
	if v := viewOf(t, rp, "sfw", "x"); v.Lease != 1 {
		t.Fatalf("x, named by the amendment only: lease %d, want 1", v.Lease)
	}
}

// TestLeaseInvariantWithAmendments: isolates that admit only within what
// the replies of their batches and of their amendments told them (each
// lease counted from the batch's cut) never admit more than the limit in a
// window, and count + every reservation stays within it after every
// apply (at the coordinator's time: a standing lease whose life ended
// before its window began is void at the isolate too, and free), while they
// race each other.
func TestLeaseInvariantWithAmendments(t *testing.T) {
	c, clk := newTestCoordinator(t, t0, nil)
	const isolates, rounds = 12, 120
	var mu sync.Mutex
	admitted := map[int64]int64{} // window -> admitted
	var wg sync.WaitGroup
	for i := 0; i < isolates; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			id := "am-" + string(rune('a'+i))
			// admitted since the last cut (in window sinceWin), the lease
			// left (for window win) and when it is void
			var since, sinceWin, win, left, expires int64
			admit := func(now int64) {
				if expires != 0 && now >= expires {
					left = 0
				}
				if now/sec != win || left <= 0 || since > 0 && sinceWin != win {
					return // (one window's cost per batch, as this model reports it)
				}
				sinceWin = win
				x := rng.Int64N(left + 1)
				left -= x
				since += x
				mu.Lock()
				admitted[win] += x
				mu.Unlock()
			}
			// tell applies a reply to the batch cut at cut: its lease is
			// void life after the cut (as the module's, leaseExpiry).
			tell := func(rp *wire.Reply, cut int64) {
				for _, v := range rp.Entries {
					if v.Key != "k" {
						continue
					}
					pending := int64(0)
					if v.Window == sinceWin {
						pending = since
					}
					left, win, expires = v.Lease-pending, v.Window, 0
					if v.Life != 0 {
						expires = cut + v.Life
					}
				}
			}
			for seq := int64(1); seq <= rounds; seq++ {
				if rng.IntN(3) == 0 {
					clk.add(rng.Int64N(sec / 10))
				}
				now := clk.now()
				b := batch(id, seq, now, wire.Delta{Limiter: "sfw", Key: "k", Window: sinceWin, Delta: since, Demand: since + rng.Int64N(20)})
				since, sinceWin = 0, now/sec
				rp, err := c.Sync(context.Background(), b)
				if err != nil {
					t.Error(err)
					return
				}
				tell(rp, now)
				checkReservedNow(t, c)
				admit(now)
				if rng.IntN(2) == 0 {
					ask := since + 1 + rng.Int64N(15)
					rp, err := c.Sync(context.Background(), amend(b, wire.Ask{Limiter: "sfw", Key: "k", Window: clk.now() / sec, Cost: ask}))
					if err != nil {
						t.Error(err)
						return
					}
					tell(rp, now)
					checkReservedNow(t, c)
					admit(clk.now())
				}
			}
		}(i)
	}
	wg.Wait()
	var total int64
	for w, n := range admitted {
		total += n
		if n > 100 {
			t.Errorf("window %d: admitted %d > 100", w, n)
		}
	}
	if s := c.m.Stats(); s.AsksGranted == 0 || total == 0 {
		t.Fatalf("the test exercised nothing: %d granted to asks, %d admitted", s.AsksGranted, total)
	}
	t.Logf("admitted %d over %d windows, %d units granted to asks", total, len(admitted), c.m.Stats().AsksGranted)
}

// checkReservedNow asserts that every strict fixed-window key's count plus
// what is reserved for its isolates at the coordinator's time is within the
// limit, in its window and the next.
func checkReservedNow(t *testing.T, c *testCoordinator) {
	t.Helper()
	c.withMerger(func(m *Merger) {
		now := c.opts.Clock.Now()
		for _, st := range m.keys {
			if st.lim.Mode != wire.Strict || st.lim.IsBucket() {
				continue
			}
			_, key, _ := splitKeyStorageKey([]byte(st.skey))
			for _, W := range []int64{st.win, st.win + 1} {
				sum := st.usedIn(W, now)
				for i := range st.isos {
					sum += st.reservation(&st.isos[i], W, now)
				}
				if limit := st.limitFor(key, now); sum > limit {
					t.Errorf("%s/%s window %d: count + reserved = %d > limit %d", st.lim.Name, key, W, sum, limit)
				}
			}
		}
	})
}
