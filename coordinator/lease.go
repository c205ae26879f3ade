package coordinator

import (
	"math"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Strict-mode leases, Doorman-style proportional share.
//
// Windowed limiters: the coordinator tracks the reservation L_j of each
// isolate j for the window W (see grantWindow for why it can exceed the
// lease last told to j). After a batch from isolate i is applied (its
// deltas already consumed its lease), with used = count[W] (sliding window:
// plus the previous window's weighted share),
//
//	free   = max(0, limit - used - Σ_j L_j)
//	share  = (limit - used) * demand_i / Σ_j demand_j
//	L_i'   = min(max(share, 1 if demand_i > 0 and free > 0), L_i + free)
//
// so count + Σ_j L_j <= limit holds after every grant: isolates that admit
// only within their lease never overrun the limit. demand is an EWMA
// (alpha 1/2) of the cost each isolate asked for per sync.
//
// Bucket limiters: the bucket (TAT) is charged with the cost isolates
// report; leases are reservations on what it holds. With tokens =
// burst - (TAT - now)/T (T = period/limit) and S the sum of the leases,
//
//	S <= tokens after every grant
//
// so reported cost plus what isolates may still admit never exceeds what
// one bucket admits. (Withdrawing a grant from the bucket at once instead
// let the bucket refill while leases sat unused: 20 s under the rate filled
// the isolates' pockets with 4,000 tokens that a flash crowd spent in one
// second, 263% over the limit.) A reported delta consumes the isolate's
// lease and charges the bucket.

// grantWindow recomputes isolate me's lease on st for window W at time now
// and returns the budget of W left free after it (neither counted nor
// reserved), which the reply tells the isolate.
func (m *Merger) grantWindow(st *keyState, me *isoState, key string, W, now, unmet int64) (free int64) {
	lim := st.lim
	P := lim.Period
	limit := st.limitFor(key, now)
	cnt, prv := st.windowCounts(W)
	used := cnt
	if lim.Algorithm == wire.SlidingWindow {
		elapsed := int64(0)
		if limitmath.Window(now, P) == W {
			elapsed = now - W*P
		}
		used = addSat(used, mulDivUp(prv, P-elapsed, P))
	}
	var sumL, sumD, sumNext, mine, active int64
	var pace float64 // the fleet's demand per window
	horizon := now - 2*P
	for i := range st.isos {
		is := &st.isos[i]
		r := st.reservation(is, W, now)
		sumL = addSat(sumL, r)
		if is == me {
			mine = r
		}
		if is != me {
			sumNext = addSat(sumNext, st.reservation(is, W+1, now))
		}
		if is.seen >= horizon {
			sumD = addSat(sumD, is.demand)
			pace += is.perWindow(P)
			active++
		}
	}
	// The band: the window is far from its limit when what the fleet is
	// expected to ask until the window ends (its pace over the time left,
	// plus three Poisson deviations), plus a unit held by every active
	// isolate, fits in what is neither counted nor reserved. There an
	// active isolate holds a unit ahead of its next request, which it
	// then decides locally; nearer the limit a held unit that its holder
	// does not use would be denied to the others, so it holds only what
	// it asked for. (A standing unit for the next window given the same
	// way to isolates that are not busy was measured and dropped: it
	// made isolates start windows without hearing the upstream's circuit
	// close, and the corpus rarely passes the test.)
	left := float64((W+1)*P-now) / float64(P)
	far := fits(pace*left, active, limit-used-sumL)
	li := int64(0) // what the isolate may still admit under the lease it was told
	live := !m.leaseExpired(me, now)
	switch {
	case !live: // it admits nothing more under an expired lease
	case me.leaseWin == W:
		li = min(me.granted, me.lease)
	case me.leaseWin < W && W == me.standUntil:
		li = me.standRes // its standing lease, not yet reported in W
	}
	free = max(0, limit-used-sumL)
	share := int64(0)
	if sumD > 0 {
		share = mulDiv(max(0, limit-used), me.demand, sumD)
	}
	// A lease larger than what the isolate will use only locks budget away
	// from the others. A busy isolate (it asks for at least busyPerWindow
	// per window: it will use what it holds) gets what it will ask for
	// until the window ends at its pace; a sparse one (a request now and
	// then) gets what it was refused in this batch and nothing to hold.
	need := m.need(me, P, unmet, far)
	lambda := me.perWindow(P)
	share = min(share, need)
	if need > 0 && free > 0 && share < 1 {
		share = 1
	}
	// The grant may shrink (shares follow demand), but the reservation
	// only shrinks once the isolate has seen the smaller lease: until its
	// next batch it may still admit up to li under the old one, so it
	// reserves max(li, grant). A new batch proves the isolate applied the
	// previous reply (it keeps one batch in flight), and then li is what
	// is left of the grant after the cost it reported.
	grant := min(share, addSat(li, free))
	me.granted, me.lease, me.leaseWin = grant, max(li, grant), W
	stand := int64(0)
	if lim.Algorithm == wire.FixedWindow && lambda >= busyPerWindow && sumD > 0 {
		// A standing lease for the next window: what the isolate will
		// almost surely use there (its demand per window less three
		// Poisson deviations: a sparse isolate, whose demand is also
		// the noisiest estimate, gets none, so unused standing budget
		// stays rare), at
		// most its demand-proportional share of the limit and what the
		// others' reservations there leave. It starts the window
		// without asking, and so without waiting.
		// Like a lease, a standing lease is at most what the isolate
		// uses before its next sync (need): held by an isolate that
		// dies, it is lost to the window (a lease that outlived its
		// isolate counts as spent, see reservation).
		stand = int64(lambda - 3*math.Sqrt(lambda))
		stand = max(0, min(stand, max(need, 1), mulDiv(limit, me.demand, sumD), limit-sumNext))
	}
	// The isolate may still start W+1 on the standing lease it was told
	// last: reserve the larger until it has seen this one.
	if me.standUntil == W+1 && live {
		me.standRes = max(me.stand, stand)
	} else {
		me.standRes = stand
	}
	me.stand, me.standUntil = stand, W+1
	m.renew(me, now)
	return max(0, limit-used-(sumL-mine+me.lease))
}

// busyPerWindow is the demand per window (cost units) from which an
// isolate counts as busy for leases: it gets leases of twice its demand
// per sync and a standing lease of what it will almost surely use (see
// grantWindow).
const busyPerWindow = 4

// holdFloor is the demand over a lease's life (cost units) from which an
// isolate that is not busy holds one unit ahead of need: it will probably
// ask within the lease's life, so its next request decides locally. Below
// it the unit would mostly sit unused until the lease expires.
const holdFloor = 0.5

// need returns the cost isolate me should hold after this grant (before
// its share caps it): what it was refused (unmet); for a busy isolate
// (a batch at least every quarter period) twice its demand per sync; for
// an active one at least one unit, so its next request decides locally.
// Budget held by an isolate that does not use it returns at the lease's
// expiry, a lifetime later, not at the window's end.
func (m *Merger) need(me *isoState, P, unmet int64, far bool) int64 {
	switch {
	case me.gap*4 <= P:
		return max(unmet, (2*me.demand+demandScale-1)/demandScale)
	case far && me.perWindow(int64(m.opts.LeaseLife)) >= holdFloor:
		return max(unmet, 1)
	}
	return unmet
}

// fits reports whether an expected demand of x cost units (Poisson), plus
// one unit held by each of n isolates, fits in room.
func fits(x float64, n, room int64) bool {
	return x+3*math.Sqrt(x)+float64(n) <= float64(room)
}

// leaseExpired reports whether the lease and standing lease of me are void at
// now: the isolate stopped admitting under them a grace period ago.
func (m *Merger) leaseExpired(me *isoState, now int64) bool {
	return me.expires != 0 && now >= me.expires
}

// renew starts the life of a lease granted to me at now: the isolate uses
// it for LeaseLife after it cut its batch (before now), so it has stopped
// by now+LeaseLife, and reports what it admitted within LeaseGrace after
// that.
func (m *Merger) renew(me *isoState, now int64) {
	me.usable = addSat(now, int64(m.opts.LeaseLife))
	me.expires = addSat(me.usable, int64(m.opts.LeaseGrace))
}

// release gives back every lease and standing lease of me (a graceful
// stop, wire.Batch.End): the isolate reported what it admitted and admits
// nothing more under them.
func (m *Merger) release(me *isoState, now int64) {
	me.lease, me.granted, me.stand, me.standRes, me.standUntil = 0, 0, 0, 0, 0
	me.expires, me.usable = now, now
}

// perWindow returns the isolate's demand per window of length period
// (cost units): its demand per batch over its gap between batches.
func (is *isoState) perWindow(period int64) float64 {
	if is.gap <= 0 {
		return 0
	}
	return float64(is.demand) / demandScale * float64(period) / float64(is.gap)
}

// grantBucket tops up isolate me's lease on bucket st at time now. Bucket
// leases only grow (an isolate may spend its lease at any time, so it stays
// reserved until reported); like windowed ones they are sized by need: a
// busy isolate up to twice its demand per sync, a sparse one what it was
// refused.
func (m *Merger) grantBucket(st *keyState, me *isoState, key string, now, unmet int64) {
	lim := st.lim
	P := lim.Period
	limit := st.limitFor(key, now)
	burst := lim.EffectiveBurst(limit)
	debt := max(0, st.tat-now)
	tokens := max(0, burst-mulDivUp(debt, limit, P))
	var sumL, sumD int64
	horizon := now - 2*P
	if m.leaseExpired(me, now) {
		me.lease = 0 // it admits nothing more under it
	}
	for i := range st.isos {
		is := &st.isos[i]
		sumL = addSat(sumL, st.reservation(is, 0, now))
		if is.seen >= horizon {
			sumD = addSat(sumD, is.demand)
		}
	}
	free := max(0, tokens-sumL)
	share := int64(0)
	if sumD > 0 {
		share = mulDiv(tokens, me.demand, sumD)
	}
	need := m.need(me, P, unmet, false)
	share = min(share, need)
	if need > 0 && free > 0 && share < 1 {
		share = 1
	}
	if g := min(max(0, share-me.lease), free); g > 0 {
		me.lease += g
	}
	m.renew(me, now)
}
