package merge

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

// grantWindow recomputes isolate me's lease on st for window W at time now,
// after its batch reported delta cost units and was refused unmet, and
// returns the budget of W left free after it (neither counted nor
// reserved), which the reply tells the isolate. back says the batch is
// the isolate's first with the key after more than two periods without.
func (m *Merger) grantWindow(st *keyState, me *isoState, key string, W, now, unmet, delta int64, back bool) (free int64) {
	lim := st.lim
	P := lim.Period
	limit := st.limitFor(key, now)
	used := st.usedIn(W, now)
	var sumL, sumD, sumNext, mine int64
	var pace float64 // the fleet's demand per window
	// The units the others hold that they will not use before W ends
	// (uNow), and of their standing leases in W+1 (uNext): see strand.go.
	var uNow, uNext, spent float64
	unit := st.costUnit() // what one request costs: what an isolate holds ahead
	fit := st.fitShare()  // the share of the isolates' asks a unit held ahead serves
	left := float64((W+1)*P-now) / float64(P)
	horizon := now - 2*P
	for i := range st.isos {
		is := &st.isos[i]
		r := st.reservation(is, W, now)
		if is == me && me.voidBy(m.cutAt) {
			// Its batch, cut once every lease it was told was void,
			// reports all it admitted under them: what they held unused
			// is free for this grant too. (Counted, its lapsed units
			// came back only at its next batch: a Worker idle past its
			// lease's life asked with 2 units of its own left on a 20
			// a day key, was refused, and admitted 300 ms later.)
			r = 0
		}
		sumL = addSat(sumL, r)
		if is == me {
			mine = r
			continue
		}
		rn := st.reservation(is, W+1, now)
		sumNext = addSat(sumNext, rn)
		// Its pace counts whether or not its lease is alive (a sparse
		// isolate's rarely is between requests); what it can still use
		// of what it holds is heldOutlook's and standShare's to say.
		lam := is.perWindow(P)
		lamH, lamS := lam, lam
		if r <= unit {
			lamH = lam * fit
		}
		if rn <= unit {
			lamS = lam * fit
		}
		sp, un := heldOutlook(is, r, lamH, W, P, now, unit)
		spent += sp
		uNow += un
		uNext += st.standUnused(is, rn, lamS, W+1, now)
		own := lam
		if is.seen >= horizon {
			sumD = addSat(sumD, is.demand)
		} else {
			// Not seen for two periods (kept: keepFor): its pace
			// over the time since, at most its own.
			own = paceSince(is, P, now)
		}
		pace += own
	}
	if me.seen >= horizon {
		sumD = addSat(sumD, me.demand)
		pace += me.perWindow(P)
	}
	lambda := me.perWindow(P)
	// The band: an active isolate holds a unit ahead of its next request,
	// which it then decides locally, while the budget that units held
	// and never used are expected to strand (held by every isolate, this
	// one's included) stays within StrandBudget of the limit; nearer the
	// limit it holds only what it asked for and waits for the rest.
	budget := m.opts.StrandBudget * float64(limit)
	room := float64(limit-used) - spent
	// What it holds ahead it uses only within the lease's life (renewed
	// by its next batch, which a sparse isolate sends with its next
	// request): past that the units stay reserved, unused, as long as
	// the window lasts (reservation).
	muMe := lambda * min(left, float64(m.opts.LeaseLife)/float64(P))
	// Only a batch with a request in it holds ahead (here, and standing
	// leases below, whose life runs into the next window). One that asks
	// for nothing and reports nothing (a peek's, a heartbeat's) says the
	// isolate's requests stopped: it is granted nothing more (need), and
	// keeps what it holds only until its next batch. Given a unit ahead
	// by each, an isolate kept one for as long as it peeked, which then
	// expired unused and stayed reserved, as spent, for the rest of the
	// window: a 100/day key peeked by 16 isolates after a few requests
	// each admitted 84. Now its next batch gives the unit back (the batch
	// reports everything the isolate admitted).
	asking := delta > 0 || unmet > 0
	// The fleet's demand in a window: its pace, or what the key's
	// windows held if more, as spread as they were (spread.go).
	dmu, dsd := st.windowDemand(pace)
	// Not on an isolate's first batch after a silence (kept, keepFor):
	// the pace it had before does not say it will ask again within the
	// lease's life. Isolates that come back together (a client's retries
	// over several hosts) each held a unit ahead: on a key of 6 a second,
	// four back after 2.5 s asked at once, three were granted two units
	// each and the fourth found the window all reserved
	// (edge/js/test/workerd-idle.test.js).
	hold := asking && !back && m.holdsAhead(me, unit) && strandCostSD(dmu*left, dsd*math.Sqrt(left), uNow+unusedCost(unit, muMe*fit, me.evidence(P), unit), room) <= budget
	li := int64(0) // what the isolate may still admit under the lease it was told
	// Live until its expiry (the coordinator's clock, a grace after the
	// isolate stopped), or until a batch cut after the isolate voided it
	// (its clock): that batch proves what it held unused. A quiet
	// isolate's module names the key once its lease lapses with units
	// left (core's lapses), so they come back at its next batch instead
	// of staying reserved, as spent, to the window's end.
	live := !m.leaseExpired(me, now) && !me.voidBy(m.cutAt)
	switch {
	case !live: // it admits nothing more under an expired lease
	case me.leaseWin == W:
		li = min(me.granted, me.lease)
	case me.leaseWin < W && W <= me.standUntil:
		li = me.standRes // its standing lease, not yet reported in W
	}
	free = max(0, limit-used-sumL)
	share := int64(0)
	if sumD > 0 {
		share = mulDiv(max(0, limit-used), me.demand, sumD)
	}
	// A lease larger than what the isolate will use only locks budget away
	// from the others. A frequent isolate (it syncs at least four times a
	// window: it will use what it holds) gets twice its demand per sync; a
	// sparse one (a request now and then) gets what it was refused in this
	// batch, plus a unit ahead while hold (need).
	told := int64(-1) // the lease it held, when it lasted until this batch (need)
	if live && unmet == 0 && (me.leaseWin == W || me.leaseWin < W && W <= me.standUntil) && P > int64(m.opts.LeaseLife) {
		told = addSat(li, delta)
	}
	need := m.need(me, P, unmet, unit, hold, told)
	if !asking {
		need = 0 // a peek's batch: nothing more (hold)
	}
	if frequent(me, P) && need > unmet {
		// A frequent isolate's units ahead of what it was refused are
		// held ahead too: with many keys an isolate syncs often while
		// each key sees a request now and then (sparse-1000), and twice
		// its demand per sync would then sit in every isolate's pocket.
		// Past what the window can spare it holds a unit ahead (hold)
		// or nothing.
		if strandCostSD(dmu*left, dsd*math.Sqrt(left), uNow+unusedCost(need, muMe, me.evidence(P), unit), room) > budget {
			if hold {
				need = max(unmet, unit)
			} else {
				need = unmet
			}
		}
	}
	if P > int64(m.opts.LeaseLife) && frequent(me, P) && need > unmet {
		// What a killed busy holder strands for the rest of a long window
		// (deadhold.go).
		need = max(unmet, min(need, deadHoldCap(limit, me.demand, sumD, unit)))
	}
	share = min(share, need)
	if need > 0 && free > 0 && share < 1 {
		share = 1
	}
	if unmet > share && addSat(li, free) >= unmet {
		// A lease smaller than the cost it was refused admits none of
		// it and stays reserved: with requests of cost 7 and a limit of
		// 100 over 64 isolates, shares of one or two units each held
		// 58% of the budget unused. Cover the refused cost while the
		// window has it free.
		share = unmet
	}
	if hold && !frequent(me, P) {
		// A sparse isolate's unit ahead is decided against what the
		// window can spare (strand.go), not the demand-proportional
		// share: with many sparse isolates that share is under two
		// units, and the unit ahead would never be granted.
		share = need
	}
	// The grant may shrink (shares follow demand), but the reservation
	// only shrinks once the isolate has seen the smaller lease: until its
	// next batch it may still admit up to li under the old one, so it
	// reserves max(li, grant). A new batch proves the isolate applied the
	// previous reply (it keeps one batch in flight), and then li is what
	// is left of the grant after the cost it reported.
	grant := min(share, addSat(li, free))
	if grant > li && grant < unit {
		// Under one of its requests' cost the lease admits nothing, and
		// what it holds stays reserved, stranded: grant nothing new.
		grant = li
	}
	if grant > li && grant < unmet && oneRequest(me, P, unmet, unit, fit) {
		// Short of the one request it holds, the grant admits none of
		// it and strands what it adds (oneRequest).
		grant = li
	}
	if !frequent(me, P) && grant < li {
		// A smaller grant frees nothing before the isolate's next
		// batch (the reservation stays li until then), and a sparse
		// isolate's next batch comes with its next request, which the
		// unit it holds would decide locally: let it keep the unit.
		grant = li
	}
	me.granted, me.lease, me.leaseWin = grant, max(li, grant), W
	stand, sparseStand := int64(0), false
	standTo, standLife := W+1, (W+1)*P+int64(m.opts.LeaseLife) // a sparse standing unit's last window and life's end
	switch {
	case lim.Algorithm != wire.FixedWindow || sumD == 0:
	case !asking: // a peek's batch: nothing ahead (hold, above)
	case lambda >= busyPerWindow*float64(unit) && frequent(me, P):
		// (Busy by its demand in units and by how often it syncs the
		// key: an isolate with one request of cost 40 in a window read
		// as busy where the key's costs have no common divisor, and
		// stood with units its requests of cost 1 did not use: the
		// corpus's mixed-costs reached 79.2% of its limit, 91.6% now.)
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
		// Counted in requests (of cost unit each): a standing lease
		// under one request's cost admits nothing.
		lr := lambda / float64(unit)
		stand = unit * int64(lr-3*math.Sqrt(lr))
		stand = max(0, min(stand, max(need, unit), mulDiv(limit, me.demand, sumD), limit-sumNext))
	case me.asks >= measuredAsks && limit-sumNext >= unit && lim.Upstream == nil:
		// Not busy: a unit to start W+1 with, so that its first request
		// there decides locally, while the budget such units are
		// expected to strand in W+1 (the fleet's pace against the whole
		// limit) stays within StrandBudget. Not for a limiter that
		// follows its upstream: its sparse isolates hear of pauses and
		// of the circuit closing by asking at a window's start (with
		// standing units, the corpus's outage test saw the circuit let
		// 27 through after the outage instead of 60).
		// An isolate with fewer requests than windows stands in each
		// window until it probably asked twice (spanWindows): its
		// next request, some windows on, decides locally too. Only
		// one that probably asks within the unit's life (holdFloor,
		// as holdsAhead) and with a measured pace (measuredAsks).
		// Where the window can spare them (a limit far above the fleet's
		// demand) it stands with as many units as its requests in a
		// window probably number (sparseStandUnits), fewer while what
		// they are expected to strand passes the budget; one unit, as
		// before, is the last tried.
		for k := sparseStandUnits(lambda, unit, fit); k >= 1; k-- {
			a := k * unit
			if limit-sumNext < a {
				continue
			}
			if k > 1 && float64(max(len(st.isos), len(m.hwms)))*float64(a)+dmu+3*dsd > float64(limit) {
				// More than one unit only where every isolate the key
				// (or the coordinator: a mark each) knows could stand
				// with as many and the key's demand in a window (mean
				// and three deviations) would still fit beside them:
				// the strand check below weighs each holder's units as
				// serving part of that demand, which many small holders
				// do not (without this, on the corpus, two or more units
				// each left 12-14% of the demand of keys at 0.2x and
				// 0.5x a limit of 100 over 64 isolates unserved).
				continue
			}
			to, life := m.spanWindows(st, me, W, now, limit, pace, budget, a)
			within := float64(life-(W+1)*P) / float64(P) // windows of life from W+1's start
			if lambda*within < holdFloor*float64(unit) {
				continue
			}
			mu := lambda * fit * min(within, 1)                                             // renewFrom below
			u := max(unusedCost(a, mu, me.evidence(P), unit), float64(a)*st.stopFloor(now)) // carry.go
			if strandCostSD(dmu, dsd, uNext+u, float64(limit)) <= budget {
				stand, sparseStand, standTo, standLife = a, true, to, life
				break
			}
		}
	}
	if unmet > 0 && lim.Algorithm == wire.FixedWindow && lim.Upstream == nil && now+m.oneWay >= (W+1)*P {
		// The reply reaches the isolate after W ends: the requests it
		// holds are then decided in W+1, where the lease for W is of no
		// use (and costs nothing: W is over). A standing lease for them
		// decides them there at once instead of after another round
		// trip. (Not for a limiter that follows its upstream: see the
		// sparse standing unit above.) Short of the one request it
		// holds, none (oneRequest).
		if left := limit - sumNext; left >= unmet || !oneRequest(me, P, unmet, unit, fit) {
			stand = max(stand, min(unmet, left))
		}
	}
	if stand < unit {
		stand = 0 // under one request's cost it admits nothing, and strands
	}
	// The isolate may still start W+1 (and the windows after it, under
	// a sparse standing unit) on the standing lease it was told last:
	// reserve the larger, in every window either stands in, until it
	// has seen this one.
	if me.standUntil > W && live {
		me.standRes = max(me.stand, stand)
		standTo = max(standTo, me.standUntil)
	} else {
		me.standRes = stand
	}
	if me.standRes == 0 {
		standTo = W + 1
	}
	me.stand, me.standUntil = stand, standTo
	m.renew(me, now)
	if sparseStand {
		// A sparse isolate's standing unit lives from the window it is
		// for: held a lifetime into W+1 whenever in W it was granted (a
		// busy isolate syncs again before W ends: its life runs from
		// then), or through the windows it stands in (spanWindows).
		m.renewFrom(me, now, standLife-int64(m.opts.LeaseLife))
	}
	return max(0, limit-used-(sumL-mine+me.lease))
}

// usedIn returns the count of window W at now for leases (a windowed
// limiter): its count, and for a sliding window the previous window's
// weighted share. The previous window's share counts what isolates still
// hold reserved there as spent: a lease of W-1 may hold cost its isolate
// admitted and has not reported yet (its batch is on its way, or the next
// sync tick has not come; or, moved to W by a batch cut before W began,
// what it held of W-1 then: notePrev), and granting that cost again in W
// would let the sliding count pass the limit early in W.
func (st *keyState) usedIn(W, now int64) int64 {
	P := st.lim.Period
	cnt, prv := st.windowCounts(W)
	if st.lim.Algorithm != wire.SlidingWindow {
		return cnt
	}
	elapsed := int64(0)
	if limitmath.Window(now, P) == W {
		elapsed = now - W*P
	}
	if st.lim.Leased() {
		for i := range st.isos {
			prv = addSat(prv, st.reservation(&st.isos[i], W-1, now))
		}
	}
	// Rounded down, as the module and the simulator weigh it: the share
	// only falls through W, so the count at the grant bounds the count
	// whenever the lease is spent. Rounded up, the last window's single
	// unit of a limit of 1 weighed a whole unit through the next window,
	// which then admitted nothing.
	return addSat(cnt, mulDiv(prv, P-elapsed, P))
}

// notePrev records, before isolate me's lease moves to window W of a
// sliding window (a batch cut at cut, on the isolate's clock, asked or
// reported there), what me still holds of window W-1: cut before W began,
// the isolate may have admitted the rest of its W-1 lease after the cut,
// unreported, and the previous window weighs on W (usedIn). Cut in W or
// later, the batch reported every cost of W-1 and the isolate admits no
// more there: it holds nothing of W-1. Other limiters keep nothing.
func (st *keyState) notePrev(me *isoState, W, cut int64) {
	if st.lim.Algorithm != wire.SlidingWindow {
		return
	}
	before := cut < W*st.lim.Period
	switch {
	case me.leaseWin == W-1 && before:
		me.prevRes = max(me.lease, 0)
	case me.leaseWin == W-1:
		me.prevRes, me.lease, me.granted = 0, 0, 0
	case me.leaseWin != W || !before:
		me.prevRes = 0
	}
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

// measuredAsks is the number of batches that asked for cost from which an
// isolate's demand per window (perWindow) is measured: one gap between
// two asks. Before that it is the prior a new entry starts with (a batch
// per period, and half the cost of the first batch): one request from an
// isolate not seen for two periods (pruned), or never, reads as half a
// request per window, holdFloor, whatever its true pace. With 64
// isolates and a key at 8 requests per window (zipf-1000's middle keys),
// each isolate asks about once in 8 windows: every such first request
// held a unit ahead and one to start the next window with (traced on one
// seed: in a window that its leases filled, 12 of the key's 20 units sat
// in leases that its 8 requests could not use).
const measuredAsks = 2

// need returns the cost isolate me should hold after this grant (before
// its share caps it): what it was refused (unmet); for a busy isolate
// (a batch at least every quarter period) twice its demand per sync; for
// one that holds ahead (hold, see grantWindow) a unit more, so its next
// request decides locally. Budget held by an isolate that does not use it
// returns at the lease's expiry, a lifetime later, not at the window's end.
//
// A lease that lasted until the batch (told >= 0: the isolate was refused
// nothing, and told is what it held) does not grow. A strict fixed-window
// key rides along lazily (wasm/core urgent): the isolate reports it when
// its lease is half spent, at its next sync tick, so its demand per batch
// is over half the lease, and twice that demand grew the lease at every
// batch until the share capped it. Measured with real processes
// (TestStoppedHostStrandsNoBudget, 4 isolates at about 23 requests/s each,
// 100 ms sync, 1,000/hour): leases of 16-26 units each, 0.7-1.1 s of
// demand where a sync interval's was 2-3, all of it stranded when the host
// was killed. A lease that did not last (unmet) grows to twice the demand,
// which then counts what was refused; where the key is reported at every
// tick, the demand is at most half the lease and nothing changes. Only
// where the window outlives a lease's life (grantWindow): in a shorter
// one the growth, about a tick's demand per batch, stays within what the
// isolate admits in a lease's life, and a dead isolate's lease strands
// no longer than that life; there the extra units absorb bursts (kept
// for every window, bursty-5000 waited 10% -> 19% of its decisions and
// step-x4 19% -> 24%, corpus, 3 seeds).
func (m *Merger) need(me *isoState, P, unmet, unit int64, hold bool, told int64) int64 {
	switch {
	case frequent(me, P):
		perBatch := (2*me.demand + demandScale - 1) / demandScale
		if told >= 0 {
			perBatch = min(perBatch, max(told, 2))
		}
		return max(unmet, perBatch)
	case hold:
		return addSat(unmet, unit)
	}
	return unmet
}

// oneRequest reports whether what isolate me holds, need cost units of a
// key of period P and request cost unit that it was refused (or asked
// for), is probably one request: the key's sparse asks are mostly costly
// requests (fit, its fitShare, under 1/2), me syncs the key less than four
// times a window (frequent), need is over half its demand per window, and
// over three requests of cost unit. A grant short of need then admits nothing
// (a request is decided whole) and the units it adds stay reserved until
// its next request or the lease's end, while the others' smaller requests
// are refused for them: on the corpus's mixed-costs (requests of cost 1,
// 7, 40 and 150) such grants held utilisation at 91.6%, 96.6% without
// them. Several held requests (a busy isolate's, a burst) are served in
// part as before. A small need is left to partial grants either way: two
// requests of cost 1 read as one of cost 2, and refused a unit of them a
// sliding limit of 3 at 10x over 32 isolates admitted 171 in 60 s
// instead of 173, the CRM trace's 1 s sync waited 67 ms at p99 instead of
// 23. And a key that shows no costly requests is left to partial grants:
// without fit, a burst of 10 requests of cost 1 on a fresh key (the
// JavaScript package's close test, whose batch read 12 refused with 7
// free) got nothing, and 3 of 10 were admitted in 6 of 15 runs under
// load (TestBurstOnAFreshKeyServedInPart).
func oneRequest(me *isoState, P, need, unit int64, fit float64) bool {
	return fit < 0.5 && need > 3*unit && !frequent(me, P) && me.perWindow(P) < 2*float64(need)
}

// frequent reports whether me syncs a key of period P at least four times
// a window: it then holds twice its demand per sync (need).
func frequent(me *isoState, P int64) bool { return me.gap*4 <= P }

// sparseStandMiss is the share, at most, of a sparse isolate's requests in
// a window that its standing units do not cover (sparseStandUnits): 5%.
const sparseStandMiss = 0.05

// maxSparseStand is the most requests' worth a sparse isolate stands with
// in a window: 8.
const maxSparseStand = 8

// sparseStandUnits returns how many requests' worth (of cost unit each) a
// sparse isolate whose demand is lambda per window (cost) stands with in
// each window of its span, where the window can spare them (grantWindow
// checks what they are expected to strand, and tries fewer): the fewest
// that leave at most sparseStandMiss of its requests there (Poisson)
// uncovered, within maxSparseStand. One where the key's requests do
// not all cost a unit (fit < 1: a unit ahead serves only some). With one
// unit, every request after an isolate's first in a window asked and
// waited: on a key of 10,000/s at 100/s over 64 isolates (1.6 requests
// per isolate and window), 46% of requests waited a round trip.
func sparseStandUnits(lambda float64, unit int64, fit float64) int64 {
	if fit < 1 || unit <= 0 || lambda <= 0 {
		return 1
	}
	lr := lambda / float64(unit)
	p := math.Exp(-lr) // P(N = k)
	tail := 1 - p      // P(N > k), from k = 0
	over := lr         // E[(N - k)+]: the requests past k
	for k := int64(1); k <= maxSparseStand; k++ {
		over -= tail
		p *= lr / float64(k)
		tail -= p
		if over <= sparseStandMiss*lr {
			return k
		}
	}
	return maxSparseStand
}

// spanRequests is how many requests a sparse isolate's standing unit
// waits for (spanWindows): the unit stands until the isolate probably
// asked that many times, so its next request finds it with probability
// 1 - e^-2 (86%) where it has a request every few windows.
const spanRequests = 2

// spanWindows returns the last window a sparse isolate's standing units
// (a cost, sparseStandUnits requests' worth) granted in W at now stand
// in, and the end of their life (ns): a lifetime into W+1 (W+1 alone)
// unless the isolate reads wire.View.StandTo and its requests come
// further apart than that; then until it probably asked spanRequests
// times per unit at its pace, within wire.MaxStandWindows windows, through the
// last window where the units fit: its budget has them free (count and
// every other isolate's reservation: they are reserved in each window
// and admitted at most once in each), and the budget that units held and
// never used are expected to strand there (every isolate's standing units
// in it, these with the chance that their holder stopped by then) stays
// within budget for a fleet asking pace per window (grantWindow's check
// of W+1, for each window after it).
func (m *Merger) spanWindows(st *keyState, me *isoState, W, now, limit int64, pace, budget float64, a int64) (to, life int64) {
	P := st.lim.Period
	unit := st.costUnit()
	fit := st.fitShare()
	to, life = W+1, addSat((W+1)*P, int64(m.opts.LeaseLife))
	lam := me.perWindow(P) * fit // cost per window, in requests that fit a unit
	if !m.spans || lam <= 0 {
		return to, life
	}
	reqs := spanRequests * float64(max(a/unit, 1)) // spanRequests per unit it stands with
	want := now + int64(min(reqs*float64(unit)/lam*float64(P), float64(wire.MaxStandWindows*P), float64(wire.MaxStandWindows*int64(m.opts.LeaseLife))))
	if want <= life {
		return to, life
	}
	last := min(limitmath.Window(want-1, P), W+wire.MaxStandWindows)
	if last <= W+1 {
		return to, life
	}
	own := unusedCost(a, lam, me.evidence(P), unit) // in a whole window
	mu, sd := st.windowDemand(pace)
	stop := st.stopFloor(now)
	// What the others hold in each window of the span, and expect to
	// leave unused there: one pass over the isolates (most hold nothing
	// past W+1), then one per window.
	n := int(last - W - 1)
	var sums [wire.MaxStandWindows]int64
	var unused [wire.MaxStandWindows]float64
	for i := range st.isos {
		is := &st.isos[i]
		if is == me || max(is.leaseWin, is.standUntil) < W+2 {
			continue
		}
		l := is.perWindow(P)
		full := -1.0 // unused in a window wholly within its life
		for j := range n {
			w := W + 2 + int64(j)
			r := st.reservation(is, w, now)
			if r == 0 {
				continue
			}
			sums[j] = addSat(sums[j], r)
			lw := l
			if r <= unit {
				lw *= fit
			}
			switch {
			case standShare(is, w, P) < 1 || r != is.standRes:
				unused[j] += st.standUnused(is, r, lw, w, now)
			case full < 0:
				full = st.standUnused(is, r, lw, w, now)
				fallthrough
			default:
				unused[j] += full
			}
		}
	}
	for j := range n {
		w := W + 2 + int64(j)
		cnt, _ := st.windowCounts(w)
		sum := addSat(cnt, sums[j])
		gone := float64(a) * (1 - math.Pow(1-stop, float64(w-W))) // stopped by w
		// The unit must fit beside what w holds (sum), and what the
		// units there leave unused must strand little of a demand the
		// whole limit less w's count serves: the reserved units serve
		// part of that demand (strand.go's R), so taking them off the
		// room too counted each unused unit twice and cut spans once
		// about half the limit stood (half-limit row: 50% of requests
		// waited, 43% now).
		if limit-sum < a || strandCostSD(mu, sd, unused[j]+max(own, gone), float64(limit-cnt)) > budget {
			break
		}
		to = w
	}
	if to == last {
		return to, max(life, want)
	}
	return to, max(life, (to+1)*P)
}

// holdsAhead reports whether isolate me asks often enough to hold a
// request's cost (unit) ahead of need: at least holdFloor requests within
// a lease's life, so it will probably use what it holds before the lease
// expires, by a pace measured (measuredAsks), not the prior of a new
// entry.
func (m *Merger) holdsAhead(me *isoState, unit int64) bool {
	return me.asks >= measuredAsks && me.perWindow(int64(m.opts.LeaseLife)) >= holdFloor*float64(unit)
}

// standShare returns the share of window win (of length P) in which is
// may still use its standing lease: until its lease is void, at most the
// whole window.
func standShare(is *isoState, win, P int64) float64 {
	if is.usable == 0 {
		return 1 // a record from before lease lifetimes: until the window ends
	}
	return min(max(float64(is.usable-win*P)/float64(P), 0), 1)
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
func (m *Merger) renew(me *isoState, now int64) { m.renewFrom(me, now, now) }

// renewFrom is renew for a lease whose life starts at from (>= now: a
// standing lease for a window that starts then); the reply tells the
// isolate the life from now (lifeLeft). A life never shortens while a
// standing lease over several windows is alive.
func (m *Merger) renewFrom(me *isoState, now, from int64) {
	u := addSat(max(now, from), int64(m.opts.LeaseLife))
	if me.standUntil > me.leaseWin+1 && me.usable > now {
		// A standing lease over several windows keeps its life: until
		// the isolate has seen the reply that shortens it, it may
		// still admit under it.
		u = max(u, me.usable)
	}
	me.usable = u
	me.expires = addSat(me.usable, int64(m.opts.LeaseGrace))
}

// lifeLeft returns the life a reply at now tells me for its lease and
// standing lease (wire.View.Life, from the isolate's cut, which precedes
// now): until usable; -1 (void at once) when that is past.
func lifeLeft(me *isoState, now int64) int64 {
	if me.usable <= now {
		return -1
	}
	return me.usable - now
}

// tellLife sets v.Life, the life of me's lease and standing lease told at
// now in the reply to the batch cut at cut (the isolate's clock), and
// notes when they are void on the isolate's clock (voidAt: the module
// voids them at cut plus the life, core.leaseExpiry). voidAt only grows:
// until the isolate has seen the last reply it may still hold an earlier
// one's lease.
func (me *isoState) tellLife(v *wire.View, cut, now int64) {
	v.Life = lifeLeft(me, now)
	me.voidAt = max(me.voidAt, addSat(cut, max(v.Life, 0)))
}

// voidBy reports whether a batch cut at cut (the isolate's clock) was cut
// once every lease and standing lease me was told had become void on the
// isolate: it then reports all the isolate admitted under them, and the
// isolate admits nothing more under them.
func (me *isoState) voidBy(cut int64) bool {
	return me.voidAt != 0 && cut >= me.voidAt
}

// release gives back every lease and standing lease of me (a graceful
// stop, wire.Batch.End): the isolate reported what it admitted and admits
// nothing more under them.
func (m *Merger) release(me *isoState, now int64) {
	me.lease, me.granted, me.stand, me.standRes, me.standUntil, me.prevRes = 0, 0, 0, 0, 0, 0
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

// chargeExpired ends the bucket leases of st's isolates other than me
// whose life is over (an isolate that stopped, or was killed, holding
// one): each is charged to the bucket as spent at the lease's end (the
// isolate may have spent it at any time until then, and not after:
// charging at the end is the latest, so the most careful, time) and
// given up. The bucket then refills it at the limit's rate, instead of
// the reservation holding the bucket below its burst for good. An isolate
// that did spend it and reports late is charged a second time: safe. The
// sum of leases stays within the bucket's tokens: both fall by the lease.
func (m *Merger) chargeExpired(st *keyState, me *isoState, limit, now int64) {
	for i := range st.isos {
		is := &st.isos[i]
		if is != me && is.lease > 0 && m.leaseExpired(is, now) {
			st.tat = limitmath.AdvanceTAT(st.tat, is.expires, is.lease, st.lim.Period, limit)
			is.lease = 0
		}
	}
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
	m.chargeExpired(st, me, limit, now)
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
	need := m.need(me, P, unmet, 1, false, -1)
	share = min(share, need)
	if need > 0 && free > 0 && share < 1 {
		share = 1
	}
	if unmet > share && addSat(me.lease, free) >= unmet {
		share = unmet // as grantWindow: cover the refused cost while the bucket has it
	}
	if g := min(max(0, share-me.lease), free); g > 0 {
		me.lease += g
	}
	m.renew(me, now)
}

// tellStand sets v's standing lease (wire.View.Stand, StandTo) for a view
// of window W: what is may admit without asking in the windows after W it
// stands in (none when its standing lease is for W or before).
func (is *isoState) tellStand(W int64, v *wire.View) {
	v.Stand, v.StandTo = 0, 0
	if is.standUntil > W {
		v.Stand = is.stand
	}
	if is.standUntil > W+1 && is.stand > 0 {
		v.StandTo = is.standUntil
	}
}

// keepFor returns how long the coordinator keeps what it knows of an
// isolate on a key of period P after its last batch (keyState.prune): two
// periods, or as long as a sparse standing unit may stand (spanWindows:
// wire.MaxStandWindows windows, at most that many lease lives), so an
// isolate with a request every few windows keeps its measured pace
// (measuredAsks) from one request to the next. Dropped after two periods,
// such an isolate asked twice, waiting each time, before it held a unit
// ahead again: at half a limit of 100/s over 64 isolates (0.8 requests
// per isolate per window), a fifth of the requests came more than two
// windows after the isolate's last.
func (m *Merger) keepFor(P int64) int64 {
	return max(2*P, min(wire.MaxStandWindows*P, wire.MaxStandWindows*int64(m.opts.LeaseLife)))
}

// paceSince returns is's demand per window of period P at now, over the
// larger of its gap between batches and the time since its last batch: an
// isolate not heard from for a while counts at the pace that silence
// allows.
func paceSince(is *isoState, P, now int64) float64 {
	g := max(is.gap, now-is.seen)
	if g <= 0 {
		return 0
	}
	return float64(is.demand) / demandScale * float64(P) / float64(g)
}
