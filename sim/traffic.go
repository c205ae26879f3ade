package sim

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

const never = math.MaxInt64

// source generates one traffic stream's requests in time order.
type source struct {
	rng     *rand.Rand
	lim     int
	cost    int64
	gap     float64 // ns between requests at the base rate
	poisson bool
	kind    byte // 's'teady, 'o'noff, 'd'iurnal, 'f'lash
	pat     [9]float64
	maxF    float64
	next    int64
	end     float64 // ns: the run's end, where a generated source stops

	gids []int32 // key index -> global key id
	dist byte    // 's'ingle, 'u'niform, 'z'ipf
	zipf *rand.Zipf

	share  float64
	hotN   int
	hotLoc bool

	trace     []traceEvent
	traceGids []int32
	traceLims []int
	ti        int

	counts *countsSource // a counts trace, with gids/dist/zipf for its keys

	// pareto on/off: the current period [perStart, perEnd) and whether
	// it is on, drawn from perRng.
	perRng           *rand.Rand
	perStart, perEnd float64
	perOn            bool
}

const (
	pOn = iota
	pOff
	pPeriod
	pAmp
	pAt
	pFactor
	pRamp
	pHold
	pShape
)

func newSource(t *Traffic, lim int, gids []int32, seed uint64, idx int, end int64) *source {
	s := &source{end: float64(end), rng: rand.New(rand.NewPCG(seed, 0x7a0ff1c+uint64(idx))), lim: lim, cost: t.Cost,
		gap: 1e9 / t.Rate, poisson: t.Arrival == "poisson", gids: gids,
		share: t.Skew.Share, hotN: t.Skew.Isolates, hotLoc: t.Skew.Location}
	p := &t.Pattern
	s.pat = [9]float64{float64(p.On), float64(p.Off), float64(p.Period), p.Amplitude, float64(p.At), p.Factor, float64(p.Ramp), float64(p.Hold), p.Shape}
	if p.Kind == "pareto" {
		s.perRng = rand.New(rand.NewPCG(seed, 0x9a7e70+uint64(idx)))
		s.perOn, s.perEnd = true, s.paretoPeriod(true)
	}
	s.kind = p.Kind[0]
	s.maxF = 1
	switch s.kind {
	case 'd':
		s.maxF = 1 + p.Amplitude
	case 'f':
		s.maxF = max(p.Factor, 1)
	}
	s.dist = t.Keys.Dist[0]
	if s.dist == 'z' {
		s.zipf = rand.NewZipf(s.rng, t.Keys.S, 1, uint64(len(gids)-1))
	}
	// The first request: a random phase within one gap.
	s.next = s.advance(-1)
	return s
}

// factor is the rate multiplier at t (ns).
func (s *source) factor(t float64) float64 {
	p := &s.pat
	switch s.kind {
	case 'p':
		for t >= s.perEnd {
			s.perOn = !s.perOn
			s.perStart, s.perEnd = s.perEnd, s.perEnd+s.paretoPeriod(s.perOn)
		}
		if s.perOn {
			return 1
		}
		return 0
	case 'o':
		if math.Mod(t, p[pOn]+p[pOff]) < p[pOn] {
			return 1
		}
		return 0
	case 'd':
		return 1 - p[pAmp]*math.Cos(2*math.Pi*t/p[pPeriod])
	case 'f':
		switch d := t - p[pAt]; {
		case d < 0:
			return 1
		case d < p[pRamp]:
			return 1 + (p[pFactor]-1)*d/p[pRamp]
		case d < p[pRamp]+p[pHold]:
			return p[pFactor]
		}
	}
	return 1
}

// paretoPeriod draws the length (ns) of an on or off period: Pareto with
// shape pShape and mean pOn or pOff (heavy-tailed: most periods are short,
// a few are very long).
func (s *source) paretoPeriod(on bool) float64 {
	mean := s.pat[pOff]
	if on {
		mean = s.pat[pOn]
	}
	a := s.pat[pShape]
	xm := mean * (a - 1) / a
	u := 1 - s.perRng.Float64() // (0, 1]
	return xm / math.Pow(u, 1/a)
}

// advance returns the time of the request after one at t (t = -1: the
// first), or never when it would fall at or past end.
func (s *source) advance(t int64) int64 {
	ft := float64(max(t, 0))
	if s.poisson {
		// Thinning at the peak rate. An on/off pattern's off period refuses
		// every try; after a million refused in a row, the rest of it is
		// skipped: arrivals are memoryless, so the first after it is its
		// end plus an exponential gap. Each turn moves ft forward, by a
		// gap at the peak rate or past an off period, so the loop ends at
		// end.
		for tries := 0; ft < s.end; tries++ {
			ft += s.rng.ExpFloat64() * s.gap / s.maxF
			f := s.factor(ft)
			if s.kind == 's' || s.rng.Float64()*s.maxF < f {
				break
			}
			if tries >= 1_000_000 && f <= 0 && (s.kind == 'o' || s.kind == 'p') {
				ft, tries = s.nextOn(ft), 0
			}
		}
		if ft >= s.end {
			return never
		}
		return toNs(ft)
	}
	if t < 0 {
		ft = s.rng.Float64() * s.gap
	}
	f := s.factor(ft)
	if f <= 0 { // an off period: jump to the next on period
		ft, f = s.nextOn(ft), 1
	}
	if t < 0 {
		return toNs(ft)
	}
	return toNs(ft + s.gap/f)
}

// nextOn is the start (ns) of the on period after ft, which falls in an off
// period of an on/off or Pareto pattern (factor has moved the Pareto period
// to the one holding ft).
func (s *source) nextOn(ft float64) float64 {
	if s.kind == 'p' {
		return s.perEnd
	}
	cyc := s.pat[pOn] + s.pat[pOff]
	return (math.Floor(ft/cyc) + 1) * cyc
}

func toNs(f float64) int64 {
	if f >= float64(never) {
		return never
	}
	return int64(f)
}

// pick returns the isolate and global key id of the request at s.next and
// moves s to the following request.
func (s *source) pick(isolates, locations int) (iso int, gid int32, lim int, cost int64) {
	if s.trace != nil {
		ev := &s.trace[s.ti]
		switch {
		case ev.isolate >= 0:
			iso = ev.isolate % isolates
		case ev.location >= 0:
			iso = pickInLocation(s.rng, ev.location%locations, isolates, locations)
		default:
			iso = s.rng.IntN(isolates)
		}
		gid, lim, cost = s.traceGids[s.ti], s.traceLims[s.ti], ev.cost
		s.ti++
		if s.ti < len(s.trace) {
			s.next = s.trace[s.ti].t
		} else {
			s.next = never
		}
		return iso, gid, lim, cost
	}
	if s.counts != nil {
		iso, gid = s.rng.IntN(isolates), s.pickKey()
		s.next = never
		if s.counts.fill(s.rng) {
			s.next, s.counts.times = s.counts.times[0], s.counts.times[1:]
		}
		return iso, gid, s.lim, s.cost
	}
	if s.share > 0 && s.rng.Float64() < s.share {
		if s.hotLoc {
			iso = pickInLocation(s.rng, 0, isolates, locations)
		} else {
			iso = s.rng.IntN(min(s.hotN, isolates))
		}
	} else {
		iso = s.rng.IntN(isolates)
	}
	gid = s.pickKey()
	s.next = s.advance(s.next)
	return iso, gid, s.lim, s.cost
}

// pickKey returns the global id of a key drawn from the source's keys.
func (s *source) pickKey() int32 {
	switch s.dist {
	case 'u':
		return s.gids[s.rng.IntN(len(s.gids))]
	case 'z':
		return s.gids[s.zipf.Uint64()]
	}
	return s.gids[0]
}

// left returns the trace requests the source has not replayed.
func (s *source) left() int64 {
	switch {
	case s.counts != nil:
		if s.next != never {
			return s.counts.left() + 1
		}
		return s.counts.left()
	case s.trace != nil:
		return int64(len(s.trace) - s.ti)
	}
	return 0
}

// pickInLocation returns a random isolate of location loc (isolate i is in
// location i % locations).
func pickInLocation(rng *rand.Rand, loc, isolates, locations int) int {
	n := (isolates - loc + locations - 1) / locations
	if n <= 0 {
		return rng.IntN(isolates)
	}
	return loc + locations*rng.IntN(n)
}

func keyName(prefix string, i int) string { return prefix + strconv.Itoa(i) }

// latency samples the network's one-way latency, ns.
type latency struct {
	dist                 byte
	mean, lo, hi, jitter int64
	sigma, mu            float64
}

func newLatency(n *Network) latency {
	l := latency{dist: n.Latency.Dist[0], mean: int64(n.Latency.Mean), lo: int64(n.Latency.Min),
		hi: int64(n.Latency.Max), jitter: int64(n.Jitter), sigma: n.Latency.Sigma}
	if n.Latency.Mean > 0 {
		l.mu = math.Log(float64(n.Latency.Mean))
	}
	return l
}

func (l *latency) sample(rng *rand.Rand) int64 {
	var d int64
	switch l.dist {
	case 'u':
		d = l.lo + rng.Int64N(l.hi-l.lo+1)
	case 'l':
		if l.mean > 0 {
			d = int64(math.Exp(l.mu + l.sigma*rng.NormFloat64()))
		}
	default:
		d = l.mean
	}
	if l.jitter > 0 {
		d += rng.Int64N(2*l.jitter+1) - l.jitter
	}
	return max(d, 0)
}

var _ = time.Second
