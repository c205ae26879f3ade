package coordinator

import "github.com/edgelimit/edgelimit/wasm/wire"

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

// grantWindow recomputes isolate me's lease on st for window W at time now.
func (m *Merger) grantWindow(st *keyState, me *isoState, key string, W, now, unmet int64) {
	lim := st.lim
	P := lim.Period
	limit := lim.LimitFor(key)
	cnt, prv := st.windowCounts(W)
	used := cnt
	if lim.Algorithm == wire.SlidingWindow {
		elapsed := int64(0)
		if now/P == W {
			elapsed = now - W*P
		}
		used = addSat(used, mulDivUp(prv, P-elapsed, P))
	}
	var sumL, sumD int64
	horizon := now - 2*P
	for i := range st.isos {
		is := &st.isos[i]
		if is.leaseWin == W && is.lease > 0 {
			sumL = addSat(sumL, is.lease)
		}
		if is.seen >= horizon {
			sumD = addSat(sumD, is.demand)
		}
	}
	li := int64(0) // what the isolate may still admit under the lease it was told
	if me.leaseWin == W {
		li = min(me.granted, me.lease)
	}
	free := max(0, limit-used-sumL)
	share := int64(0)
	if sumD > 0 {
		share = mulDiv(max(0, limit-used), me.demand, sumD)
	}
	// A lease larger than what the isolate will use before its next sync
	// only locks budget away from the others. An isolate that syncs this
	// key several times per window (busy: its smoothed gap between batches,
	// which starts at one period, is at most a quarter period) gets up to
	// twice its demand per sync; a sparse one (a request now and then)
	// gets what it was refused in this batch and nothing to hold.
	busy := me.gap*4 <= P
	need := unmet
	if busy {
		need = max(unmet, (2*me.demand+demandScale-1)/demandScale)
	}
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
}

// grantBucket tops up isolate me's lease on bucket st at time now. Bucket
// leases only grow (an isolate may spend its lease at any time, so it stays
// reserved until reported); like windowed ones they are sized by need: a
// busy isolate up to twice its demand per sync, a sparse one what it was
// refused.
func (m *Merger) grantBucket(st *keyState, me *isoState, key string, now, unmet int64) {
	lim := st.lim
	P := lim.Period
	limit := lim.LimitFor(key)
	burst := lim.EffectiveBurst(limit)
	debt := max(0, st.tat-now)
	tokens := max(0, burst-mulDivUp(debt, limit, P))
	var sumL, sumD int64
	horizon := now - 2*P
	for i := range st.isos {
		is := &st.isos[i]
		sumL = addSat(sumL, max(0, is.lease))
		if is.seen >= horizon {
			sumD = addSat(sumD, is.demand)
		}
	}
	free := max(0, tokens-sumL)
	share := int64(0)
	if sumD > 0 {
		share = mulDiv(tokens, me.demand, sumD)
	}
	need := unmet
	if me.gap*4 <= P {
		need = max(unmet, (2*me.demand+demandScale-1)/demandScale)
	}
	share = min(share, need)
	if need > 0 && free > 0 && share < 1 {
		share = 1
	}
	if g := min(max(0, share-me.lease), free); g > 0 {
		me.lease += g
	}
}
