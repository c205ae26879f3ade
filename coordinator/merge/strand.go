package merge

import "math"

// Budget stranded by units held ahead of need.
//
// An isolate decides locally only within what it holds, so a sparse
// isolate (a few requests per window) decides its next request without a
// round trip only if it holds a unit before the request comes. A unit
// held by an isolate that gets no request before the window ends is lost
// to the others if the window runs out of budget: the coordinator cannot
// take it back before the holder reports (an isolate that admitted under
// it and died never will). So holding ahead costs nothing while the
// window ends under its limit and costs the unused units when it ends at
// it. The coordinator grants a unit ahead while the expected budget so
// stranded stays within MergerOptions.StrandBudget of the limit.
//
// With R the budget of the window neither counted nor spent (limit -
// used), D the cost the fleet asks until the window ends (Poisson, mean
// mu: its pace times the time left) and U the units held that their
// holders will not use (independent Poisson counts of each holder's
// requests), the requests refused for want of budget that stranded units
// would have served are about (D + U - R)+ (at most U); with D normal,
//
//	E[(D + U - R)+] = s*phi(m/s) + m*Phi(m/s),  m = mu + U - R,  s = sqrt(mu)
//
// which is strandCost.

// unusedUnits returns the expected units left of a holding of r when the
// holder's requests until the window ends number X, of mean mu: E[(r -
// X)+]. X is Poisson for k <= 0, else negative binomial of shape k (mean
// mu, variance mu + mu^2/k): Poisson at a rate that is itself uncertain,
// Gamma-distributed with shape k around its estimate (evidence).
func unusedUnits(r int64, mu, k float64) float64 {
	switch {
	case r <= 0:
		return 0
	case mu <= 0:
		return float64(r)
	case r > 64:
		// Many units: the normal approximation (continuity-corrected) of
		// E[(r - X)+].
		v := mu
		if k > 0 {
			v += mu * mu / k
		}
		m, s := float64(r)-mu+0.5, math.Sqrt(v)
		return normalPositivePart(m, s)
	}
	p, next := math.Exp(-mu), func(j int64) float64 { return mu / float64(j+1) } // P(X = 0), P(j+1)/P(j)
	if k > 0 {
		q := mu / (k + mu)
		p, next = math.Pow(k/(k+mu), k), func(j int64) float64 { return (k + float64(j)) / float64(j+1) * q }
	}
	var u float64
	for j := int64(0); j < r; j++ {
		u += float64(r-j) * p
		p *= next(j)
	}
	return u
}

// unusedCost is unusedUnits for a holder whose requests cost unit each
// (keyState.costUnit): r units are ceil(r/unit) requests' worth, used a
// request at a time, and its mu units ahead of the window's end are
// mu/unit requests. With unit 1 it is unusedUnits.
func unusedCost(r int64, mu, k float64, unit int64) float64 {
	if unit <= 1 || r <= 0 {
		return unusedUnits(r, mu, k)
	}
	u := float64(unit)
	return min(float64(r), u*unusedUnits((r+unit-1)/unit, mu/u, k/u))
}

// costUnit returns the cost of one request of st as far as its batches
// tell: the greatest common divisor of what they asked for (a request of
// cost 7 asks 7, two ask 14), at least 1; 1 until unitAsks batches asked
// (an isolate's first ask of two requests of cost 1 would read as cost
// 2), and for every key whose costs have no common divisor.
func (st *keyState) costUnit() int64 {
	if st.unitAsks < unitAsks {
		return 1
	}
	return max(int64(st.unit), 1)
}

// noteSparseAsk records that an isolate that syncs the key less than four
// times a window (not frequent) was refused cost asked in st, which it
// holds and asks for: mostly one request, so such asks sample what the
// key's requests cost (fitShare); cost it admitted under a lease is not
// one (a report of 90 admitted read as a request of 90). Decayed by 1/64
// per ask.
func (st *keyState) noteSparseAsk(asked int64) {
	const keep = 63.0 / 64
	st.askCost = st.askCost*keep + float32(asked)
	st.askN = min(st.askN, 254) + 1
	st.fitCost *= keep
	if asked <= 3*st.costUnit() {
		st.fitCost += float32(asked)
	}
}

// fitShare returns the share of the cost sparse isolates ask for that is
// in requests a unit held ahead serves (noteSparseAsk: asks of at most
// three units, oneRequest's bound), 1 until they have asked 8 times and
// for 16 units (one large ask, a burst on a fresh key, is not evidence).
// An isolate's demand is counted in cost, and a unit held ahead is used
// only by a request that fits it: on a key with requests of cost 1, 7 and
// 40 (mixed-costs), an isolate whose pace was mostly requests of cost 40
// read as one that surely uses the unit it holds, and units held ahead
// stranded 2.2 points of the limit. Where a unit held ahead (or a
// standing unit) is judged used or stranded (grantWindow, heldOutlook,
// standUnused), the holder's pace counts times this share; the fleet's
// pace, which fills the window, is counted whole.
func (st *keyState) fitShare() float64 {
	if st.askN < 8 || st.askCost < 16*float32(st.costUnit()) {
		return 1
	}
	return min(1, float64(st.fitCost/st.askCost))
}

// unitAsks is how many asks a key's costUnit rests on: 4.
const unitAsks = 4

// noteAsk records that a batch asked for cost asked in st (costUnit).
func (st *keyState) noteAsk(asked int64) {
	if asked <= 0 || asked > math.MaxInt32 {
		return
	}
	st.unit = int32(gcd(int64(st.unit), asked))
	st.unitAsks = min(st.unitAsks, 254) + 1
}

// gcd returns the greatest common divisor of a and b (b when a is 0).
func gcd(a, b int64) int64 {
	for a != 0 {
		a, b = b%a, a
	}
	return b
}

// rateSamples is about how many gaps an isolate's pace rests on: its gap
// between batches is an average with weight 1/2 on the newest.
const rateSamples = 3

// evidence returns the shape of the uncertainty of is's pace (unusedUnits)
// for a key of period P. An isolate that syncs less than four times a
// window (not frequent) sends a batch when a request needs one, so its
// gap between batches is the gap between its requests, and its pace,
// demand over that gap, rests on rateSamples such gaps: 1/gap overshoots
// (at one gap its mean is infinite), and a Poisson at that estimate took
// units for used that went unused (zipf-1000's standing units of keys near
// the limit were held on paces of 1.2-3.4 requests per window where the
// truth was about 0.6). Its requests are then negative binomial of shape
// rateSamples times its requests per batch. A frequent isolate's batches
// come on the sync schedule: its pace is a count over a set time, and a
// Poisson at it stands (0).
func (is *isoState) evidence(P int64) float64 {
	if frequent(is, P) {
		return 0
	}
	return rateSamples * max(float64(is.demand)/demandScale, 1)
}

// strandCost returns the expected cost refused for want of budget that
// units held and never used (u, expected) would have served, when the
// fleet asks a Poisson cost of mean mu until the window ends and room is
// the budget neither counted nor spent.
func strandCost(mu, u, room float64) float64 {
	return strandCostSD(mu, math.Sqrt(max(mu, 0)), u, room)
}

// strandCostSD is strandCost for a fleet demand of mean mu and standard
// deviation sd (spread.go's windowDemand).
func strandCostSD(mu, sd, u, room float64) float64 {
	if u <= 0 {
		return 0
	}
	m := mu + u - room
	if mu <= 0 && sd <= 0 {
		return max(0, min(m, u))
	}
	return min(normalPositivePart(m, sd), u)
}

// normalPositivePart returns E[Y+] for Y ~ Normal(m, s^2).
func normalPositivePart(m, s float64) float64 {
	if s <= 0 {
		return max(m, 0)
	}
	z := m / s
	phi := math.Exp(-z*z/2) / math.Sqrt(2*math.Pi)
	return s*phi + m*0.5*math.Erfc(-z/math.Sqrt2)
}

// heldOutlook returns, for isolate is holding r units of window W (of
// length P) and asking lam per window, at now: the units it has
// probably admitted under r since it was last heard from in W and not
// reported yet (spent: fixed windows report lazily, so they are counted
// nowhere else), and the units it will probably leave unused when W ends
// (unused). It admits under r only until its lease's life ends (usable),
// though r stays reserved until the grace after it (expires): a lease of
// an isolate that stopped or died is all unused from then on.
func heldOutlook(is *isoState, r int64, lam float64, W, P, now, unit int64) (spent, unused float64) {
	from := max(is.lastHeard(), W*P)
	end := (W + 1) * P
	if is.usable != 0 {
		end = min(end, is.usable)
	}
	since := float64(max(min(now, end)-from, 0)) / float64(P)
	until := float64(max(end-now, 0)) / float64(P)
	k := is.evidence(P)
	spent = float64(r) - unusedCost(r, lam*since, k, unit)
	return spent, unusedCost(r, lam*(since+until), k, unit)
}

// lastHeard returns the coordinator time (ns) until which is has
// reported every cost it admitted in the key: its last batch with the
// key, or a later batch of the isolate without it. Cost it admits is
// reported lazily, but with the isolate's next batch, whatever made
// the isolate send it (the module puts every key it admitted cost in
// into each batch it cuts), so a batch without the key says that the
// isolate admitted nothing in it since its last batch with it. An
// isolate that syncs for other keys is thus known to still hold what it
// has not reported (with many keys, every sync interval: sparse-1000's
// 16 isolates each hold units of 1,000 keys and sync every 100 ms),
// and a unit it holds and has not used by then is judged on the time
// left after it (unused), not as probably spent since its last batch
// with the key, a second or more ago at a few requests per window.
func (is *isoState) lastHeard() int64 {
	if is.hwm != nil {
		return max(is.seen, is.hwm.heard)
	}
	return is.seen
}
