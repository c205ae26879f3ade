package sim

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Tuner metrics (TuneOptions.Metric): which per key-window overrun the
// target bounds, in percent of the limit (Result.WorstOverrunPct or
// Result.P99OverrunPct).
const (
	MetricWorst = "worst"
	MetricP99   = "p99"
)

// DefaultMinUtil is the default TuneOptions.MinUtil, percent.
const DefaultMinUtil = TargetUtilisationPct

// TuneOptions configure Tune. Zero fields take the documented defaults.
type TuneOptions struct {
	// Strategy is the strategy to tune. Default the scenario's only
	// strategy; an error when it runs several.
	Strategy string
	// Metric is MetricWorst (default) or MetricP99.
	Metric string
	// Target is the largest acceptable Metric, percent of the limit.
	Target float64
	// MaxWait bounds the wait p99 (Result.WaitP99) on every seed, compared
	// at the resolution of the wait histogram (12.5% buckets). Default
	// one round trip of the scenario (twice the one-way latency's mean or
	// median); negative: no bound.
	MaxWait time.Duration
	// MinUtil is the least utilisation (Result.Utilisation, percent) on
	// every seed. Default DefaultMinUtil (97); negative: no bound.
	MinUtil float64
	// Min and Max bound the intervals scanned. Defaults 10ms and the
	// smaller of 5s and a quarter of the scenario's duration.
	Min, Max time.Duration
	// Points is the number of intervals scanned, log-spaced from Min to
	// Max (rounded to the millisecond, or to the microsecond where that
	// leaves Min..Max). Default 12.
	Points int
	// Seeds are the seeds every interval runs with. Default 1, 2, 3.
	Seeds []uint64
	// Parallel is the number of runs at once. Default 1.
	Parallel int
	// Progress, when set, is called with the fraction done.
	Progress func(float64)
}

// TunePoint is one scanned interval.
type TunePoint struct {
	Interval Duration `json:"interval"`
	// Metric is the largest value of the tuned metric over the seeds.
	Metric float64 `json:"metric_pct"`
	// WaitP50 and WaitP99 are the largest over the seeds, WaitedPct the
	// mean, Utilisation the smallest (percent).
	WaitP50     Duration `json:"wait_p50"`
	WaitP99     Duration `json:"wait_p99"`
	WaitedPct   float64  `json:"waited_pct"`
	Utilisation float64  `json:"utilisation_pct"`
	// Meets reports whether every seed met every bound: the metric within
	// the target, the wait p99 within MaxWait, the utilisation at least
	// MinUtil. Misses names the bounds some seed missed ("overrun",
	// "wait", "util").
	Meets   bool     `json:"meets"`
	Misses  []string `json:"misses,omitempty"`
	Results []Result `json:"results"` // one per seed
}

// Tuning is the answer of Tune.
type Tuning struct {
	Strategy string   `json:"strategy"`
	Metric   string   `json:"metric"`
	Target   float64  `json:"target_pct"`
	MaxWait  Duration `json:"max_wait"`     // negative: no bound
	MinUtil  float64  `json:"min_util_pct"` // negative: no bound
	Seeds    []uint64 `json:"seeds"`
	// Found reports whether an interval meets every bound; Interval is the
	// largest that does. When none does, nothing is recommended.
	Found    bool        `json:"found"`
	Interval Duration    `json:"interval"`
	Curve    []TunePoint `json:"curve"` // every interval scanned, ascending
}

// Resolve returns o with the defaults taken for sc (the one strategy sc
// runs, a round trip's wait, DefaultMinUtil, MetricWorst, 10 ms to the
// smaller of 5 s and a quarter of the run, 12 points, seeds 1, 2, 3), or
// an error naming the option out of range. Tune resolves its options
// first; a caller resolves them before a sweep to refuse them before it
// runs.
func (o TuneOptions) Resolve(sc *Scenario) (TuneOptions, error) {
	if o.Strategy == "" {
		if len(sc.Strategies) != 1 {
			return o, fmt.Errorf("sim: tune: the scenario runs %d strategies (%s): name the one to tune",
				len(sc.Strategies), strings.Join(sc.Strategies, ", "))
		}
		o.Strategy = sc.Strategies[0]
	}
	if !validStrategy(o.Strategy) {
		return o, fmt.Errorf("sim: tune: unknown strategy %q", o.Strategy)
	}
	if o.Strategy == Central || o.Strategy == LocalOnly {
		return o, fmt.Errorf("sim: tune: %s does not depend on the sync interval: nothing to tune", o.Strategy)
	}
	if o.MaxWait == 0 {
		o.MaxWait = time.Duration(roundTrip(sc))
	}
	if o.MinUtil == 0 {
		o.MinUtil = DefaultMinUtil
	}
	if o.Metric == "" {
		o.Metric = MetricWorst
	}
	if o.Min <= 0 {
		o.Min = 10 * time.Millisecond
	}
	if o.Max <= 0 {
		o.Max = min(5*time.Second, time.Duration(sc.Duration)/4)
	}
	if o.Points <= 0 {
		o.Points = 12
	}
	if len(o.Seeds) == 0 {
		o.Seeds = []uint64{1, 2, 3}
	}
	if o.Metric != MetricWorst && o.Metric != MetricP99 {
		return o, fmt.Errorf("sim: tune: unknown metric %q (want %s or %s)", o.Metric, MetricWorst, MetricP99)
	}
	if o.Max < o.Min || o.Target < 0 || math.IsNaN(o.Target) {
		return o, fmt.Errorf("sim: tune: want 0 < min <= max and target >= 0, got %v, %v, %g", o.Min, o.Max, o.Target)
	}
	if o.Min < time.Millisecond || o.Max > time.Hour || o.Max > time.Duration(sc.Duration) {
		// (A scan to 100h of a 10 s run picked 100h, where nothing synced.)
		return o, fmt.Errorf("sim: tune: the intervals scanned (%v to %v) must be within 1ms and 1h, and no longer than the run (%v)",
			o.Min, o.Max, time.Duration(sc.Duration))
	}
	return o, nil
}

// Tune scans a grid of sync intervals for strategy on sc, each with
// several seeds, and picks the largest interval whose metric stays within
// the target on every seed. It does not assume the overrun grows with the
// interval (phase effects between the interval and the window make it
// jump up and down), so it runs the whole grid.
func (s *Simulator) Tune(ctx context.Context, sc *Scenario, o TuneOptions) (Tuning, error) {
	o, err := o.Resolve(sc)
	if err != nil {
		return Tuning{}, err
	}
	t := Tuning{Strategy: o.Strategy, Metric: o.Metric, Target: o.Target, MaxWait: Duration(o.MaxWait),
		MinUtil: o.MinUtil, Seeds: o.Seeds}
	metric := func(r Result) float64 { return r.WorstOverrunPct }
	if o.Metric == MetricP99 {
		metric = func(r Result) float64 { return r.P99OverrunPct }
	}
	ivs := logGrid(o.Min, o.Max, o.Points)
	runs := len(ivs) * len(o.Seeds)
	done := 0
	for _, seed := range o.Seeds {
		rs, err := s.Sweep(ctx, sc, SweepOptions{Strategies: []string{o.Strategy}, Intervals: ivs, Seed: seed,
			Parallel: o.Parallel, Progress: func(f float64) {
				if o.Progress != nil {
					o.Progress((float64(done) + f*float64(len(ivs))) / float64(runs))
				}
			}})
		if err != nil {
			return t, err
		}
		done += len(ivs)
		for _, r := range rs {
			if r.Requests == 0 {
				// (Traffic that sends nothing met every bound at any
				// interval: 2.5 s was picked.)
				return t, fmt.Errorf("sim: tune: %s at %v sent no request (seed %d): nothing to tune on", r.Strategy, time.Duration(r.Sync), seed)
			}
		}
		for i, r := range rs {
			if len(t.Curve) <= i {
				t.Curve = append(t.Curve, TunePoint{Interval: Duration(ivs[i]), Utilisation: math.Inf(1)})
			}
			p := &t.Curve[i]
			p.Results = append(p.Results, r)
			p.Metric = math.Max(p.Metric, metric(r))
			p.WaitP50, p.WaitP99 = max(p.WaitP50, r.WaitP50), max(p.WaitP99, r.WaitP99)
			p.WaitedPct += r.WaitedPct / float64(len(o.Seeds))
			p.Utilisation = math.Min(p.Utilisation, r.Utilisation)
		}
	}
	for i := range t.Curve {
		p := &t.Curve[i]
		if p.Metric > o.Target {
			p.Misses = append(p.Misses, "overrun")
		}
		if o.MaxWait >= 0 && !withinWait(p.WaitP99, Duration(o.MaxWait)) {
			p.Misses = append(p.Misses, "wait")
		}
		if o.MinUtil >= 0 && p.Utilisation < o.MinUtil {
			p.Misses = append(p.Misses, "util")
		}
		p.Meets = len(p.Misses) == 0
		if p.Meets {
			t.Found, t.Interval = true, p.Interval
		}
	}
	return t, nil
}

// WaitBoundChecked is the largest wait p99 the tuning accepted under
// MaxWait: the upper bound of MaxWait's bucket of the wait histogram (12.5%
// buckets), or -1 without a bound.
func (t Tuning) WaitBoundChecked() Duration {
	if t.MaxWait < 0 {
		return -1
	}
	return Duration(upper(bucket(int64(t.MaxWait))))
}

// withinWait reports whether a wait quantile read from the wait histogram
// (the upper bound of its bucket) is within bound at the histogram's
// resolution: whether it is at most the upper bound of bound's bucket.
func withinWait(w, bound Duration) bool {
	return bound >= 0 && w <= Tuning{MaxWait: bound}.WaitBoundChecked()
}

// logGrid returns n intervals log-spaced from lo to hi, without repeats,
// ascending, each within [lo, hi]: rounded to the millisecond, or to the
// microsecond where the millisecond falls outside (a scan of 2200us to
// 2400us ran, and recommended, 2ms).
func logGrid(lo, hi time.Duration, n int) []time.Duration {
	seen := map[time.Duration]bool{}
	var out []time.Duration
	for i := 0; i < n; i++ {
		f := 0.0
		if n > 1 {
			f = float64(i) / float64(n-1)
		}
		x := time.Duration(math.Exp(math.Log(float64(lo)) + f*(math.Log(float64(hi))-math.Log(float64(lo)))))
		d := x.Round(time.Millisecond)
		if d < lo || d > hi {
			d = min(max(x.Round(time.Microsecond), lo), hi)
		}
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
