package merge

import (
	"errors"
	"strconv"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Amendments (wire/amend.go): a batch resent while in flight with asks
// (wire.Batch.Asks): for each key whose requests the isolate holds for a
// lease, the cost it needs in the window from the batch's cut on. Asks are
// taken for strict windowed limiters that do not follow an upstream (the
// limiters whose requests the module holds for a lease); others are
// ignored. Over a shared store (Redis) each ask is served by the part of
// the batch in its key's bucket, and a grant to an applied batch is
// written before it is told (shared_amend.go).

// checkAsks reports the first ask or final denial naming an unknown
// limiter, as a *wire.FieldError ("ak[2].limiter", "dn[0].limiter").
func (m *Merger) checkAsks(b *wire.Batch) error {
	for _, kc := range [...]struct {
		f  string
		cs []wire.KeyCost
	}{{"ak", b.Asks}, {"dn", b.Denials}} {
		for i := range kc.cs {
			if m.lims[kc.cs[i].Limiter] == nil {
				return &wire.FieldError{Field: kc.f + "[" + strconv.Itoa(i) + "].limiter",
					Err: errors.New("unknown limiter " + strconv.Quote(kc.cs[i].Limiter))}
			}
		}
	}
	return nil
}

// asks reports whether lim's keys take asks.
func asks(lim *wire.LimiterConfig) bool {
	return lim.Leased() && !lim.IsBucket() && lim.Upstream == nil
}

// askSlots adds b's asks to slots (loading their keys; a key not among the
// entries gets a slot of its own, so the reply has its view) and returns
// slots. mark is the Apply's mark (keyState.mark); pf what Prefetch read.
func (m *Merger) askSlots(b *wire.Batch, slots []slot, mark int64, pf *Prefetched, now int64) ([]slot, error) {
	for i := range b.Asks {
		a := &b.Asks[i]
		lim := m.lims[a.Limiter]
		if !asks(lim) {
			continue
		}
		st, err := m.loadKey(lim, a.Key, pf, len(b.Entries)+i, now)
		if err != nil {
			return slots, err
		}
		if st.mark != mark {
			if len(slots) >= wire.MaxBatchEntries {
				// The reply holds at most MaxBatchEntries views (what
				// the module reads): an ask past them waits for the
				// isolate's next batch.
				continue
			}
			st.mark, st.slotIdx = mark, int32(len(slots))
			slots = append(slots, slot{st: st, key: a.Key, maxWin: a.Window, asked: true})
		}
		s := &slots[st.slotIdx]
		s.maxWin = max(s.maxWin, a.Window)
		s.ask = addSat(s.ask, a.Cost)
	}
	return slots, nil
}

// grantAsk serves the ask of slot s, once the batch is applied (now, or
// before: the amendment retries it) and v, its view, made: the isolate's
// lease, what it may admit in window W from the batch's cut on, is raised
// to the ask (what it needs from the cut on) as far as the window has
// budget free (its limit less its count and every isolate's reservation),
// and v tells the lease raised, or, with nothing free, that the window is
// exhausted. An ask the lease already covers (resent, or older than the
// last) changes nothing.
func (m *Merger) grantAsk(s *slot, isolate string, now int64, v *wire.View, dup bool) {
	st := s.st
	W := max(limitmath.Window(now, st.lim.Period), s.maxWin)
	me := m.iso(st, s.key, isolate, now)
	if me == nil || me.leaseWin > W {
		return
	}
	if dup && !s.asked && s.unmet > 0 && me.leaseWin == W && me.granted <= 0 {
		// The batch asked for the key and its reply granted nothing:
		// the isolate takes that reply first, starts a dry spell and
		// denies the requests it holds there, so units granted now
		// would go unused.
		return
	}
	st.notePrev(me, W, m.cutAt)
	// What is reserved for it in W now: the lease for W, its standing
	// lease there, or (a lease that expired before W began) nothing.
	res := st.reservation(me, W, now)
	if me.leaseWin < W {
		me.granted = res
	}
	me.leaseWin, me.lease, me.granted = W, res, min(me.granted, res)
	sumL := int64(0)
	for i := range st.isos {
		sumL = addSat(sumL, st.reservation(&st.isos[i], W, now))
	}
	free := max(0, st.limitFor(s.key, now)-st.usedIn(W, now)-sumL)
	P := st.lim.Period
	want := s.ask - me.granted // what the ask needs past what it was told
	g := min(max(0, want), free)
	if g < want && oneRequest(me, P, want, st.costUnit(), st.fitShare()) {
		g = 0 // short of the one request it holds, it admits none of it
	}
	m.markKey(st)
	if g <= 0 {
		if free == 0 && want > 0 && v.Window == W &&
			now+2*m.oneWay < (W+1)*P && me.perWindow(P) < 2*float64(want) {
			// Nothing free, and the isolate's next batch would ask in
			// W again: the reply says the window is exhausted, and the
			// isolate denies what it holds for a dry spell (wire.View.
			// Exhausted) instead of holding it for that batch, which
			// would refuse it: a denial after two round trips
			// (zipf-1000 wait p99 83.9 ms, 78.3 now). Not where its
			// next ask reaches W+1 (a window of a round trip or two,
			// sim/testdata/round-trip-window.json: 96.3% -> 91.0%),
			// nor for an isolate busier than what it holds, whose held
			// requests get what others give back (a hot isolate 150
			// ms away, sim/testdata/far-hot-isolate.json, 98.5% ->
			// 97.9%).
			v.Exhausted = true
		}
		return
	}
	if me.standUntil > W && st.reservation(me, W+1, now) == 0 {
		// A standing lease for W+1 (and on) whose life is over is void
		// (and free); renewing the life below must not revive it
		// unchecked.
		me.stand, me.standRes, me.standUntil = 0, 0, 0
	}
	me.lease, me.granted = addSat(me.lease, g), addSat(me.granted, g)
	m.renew(me, now)
	m.stats.AsksGranted += g
	if v.Window == W {
		v.Lease, v.Exhausted = me.granted, false
		me.tellLife(v, m.cutAt, now)
		me.tellStand(W, v)
	}
}
