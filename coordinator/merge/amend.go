package merge

import (
	"errors"
	"strconv"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Amendments (wire/amend.go): a batch resent while in flight with the cost
// the isolate was refused for want of a lease since it cut the batch
// (wire.Batch.Asks). Asks are taken for strict windowed limiters that do
// not follow an upstream (the limiters whose requests the module holds for
// a lease); others are ignored. Over a shared store (Redis) the sub-batches
// carry no asks: an amendment there is a plain retry, and its requests are
// asked for by the isolate's next batch.

// checkAsks reports the first ask naming an unknown limiter, as a
// *wire.FieldError ("ak[2].limiter").
func (m *Merger) checkAsks(b *wire.Batch) error {
	for i := range b.Asks {
		if m.lims[b.Asks[i].Limiter] == nil {
			return &wire.FieldError{Field: "ak[" + strconv.Itoa(i) + "].limiter",
				Err: errors.New("unknown limiter " + strconv.Quote(b.Asks[i].Limiter))}
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
// slots. mark is the Apply's mark (keyState.mark).
func (m *Merger) askSlots(b *wire.Batch, slots []slot, mark int64) ([]slot, error) {
	for i := range b.Asks {
		a := &b.Asks[i]
		lim := m.lims[a.Limiter]
		if !asks(lim) {
			continue
		}
		st, err := m.loadKey(lim, a.Key, nil, -1)
		if err != nil {
			return slots, err
		}
		if st.mark != mark {
			st.mark, st.slotIdx = mark, int32(len(slots))
			slots = append(slots, slot{st: st, key: a.Key, maxWin: a.Window})
		}
		s := &slots[st.slotIdx]
		s.maxWin = max(s.maxWin, a.Window)
		s.ask = addSat(s.ask, a.Cost)
	}
	return slots, nil
}

// foldAsks makes the asks of an amendment applied as the batch itself (it
// overtook the batch, or the batch was lost) part of its demand: cost it
// was refused, which the lease grant serves like any other.
func foldAsks(slots []slot) {
	for j := range slots {
		if s := &slots[j]; s.ask > 0 {
			s.demand = addSat(s.demand, s.ask)
			s.unmet = addSat(s.unmet, s.ask)
		}
	}
}

// askSum is a digest of b's asks, never 0 (an FNV-1a like batchSum's): an
// amendment resent (the host's retry) asks for nothing more.
func askSum(b *wire.Batch) uint64 {
	h := uint64(14695981039346656037)
	for i := range b.Asks {
		a := &b.Asks[i]
		for _, s := range [...]string{a.Limiter, a.Key} {
			for j := 0; j < len(s); j++ {
				h = (h ^ uint64(s[j])) * 1099511628211
			}
			h = (h ^ 0xff) * 1099511628211
		}
		for _, v := range [...]int64{a.Window, a.Cost} {
			for k := 0; k < 8; k++ {
				h = (h ^ uint64(byte(v>>(8*k)))) * 1099511628211
			}
		}
	}
	return h | 1
}

// grantAsk serves an ask of an amendment that retries the isolate's last
// applied batch: what window W of slot s's key has free (limit less its
// count and every isolate's reservation) is added to the isolate's lease,
// up to the ask. The lease stays relative to the batch's cut (the batch's
// deltas already consumed it), which is what the reply's View.Lease tells.
func (m *Merger) grantAsk(s *slot, isolate string, now int64) {
	st := s.st
	W := max(limitmath.Window(now, st.lim.Period), s.maxWin)
	me := m.iso(st, isolate, now)
	if me == nil || me.leaseWin > W {
		return
	}
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
	g := min(s.ask, max(0, st.limitFor(s.key, now)-st.usedIn(W, now)-sumL))
	m.markKey(st)
	if g <= 0 {
		return
	}
	me.lease, me.granted = addSat(me.lease, g), addSat(me.granted, g)
	m.renew(me, now)
	m.stats.AsksGranted += g
}
