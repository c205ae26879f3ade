package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/edgelimit/edgelimit/edge/isolate"
)

// Simulator holds the compiled module; it runs scenarios. It is safe for
// concurrent use (each run has its own isolates and coordinator).
type Simulator struct {
	rt *isolate.Runtime
	// StrandBudget is the simulated coordinator's
	// merge.MergerOptions.StrandBudget (the coordinator's --strand-budget):
	// the share of a window's limit that units held ahead by sparse
	// isolates may be expected to strand. 0 takes the coordinator's
	// default (1%); negative holds nothing ahead. Set it before runs.
	StrandBudget float64
	// MaxIsolatesPerKey is the simulated coordinator's
	// merge.MergerOptions.MaxIsolatesPerKey (the coordinator's
	// --max-isolates-per-key): 0 takes its default (256). Set it before
	// runs.
	MaxIsolatesPerKey int
}

// New compiles the embedded module once.
func New(ctx context.Context) (*Simulator, error) {
	rt, err := isolate.NewRuntime(ctx, isolate.Options{})
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return &Simulator{rt: rt}, nil
}

// Close releases the module.
func (s *Simulator) Close(ctx context.Context) error {
	if err := s.rt.Close(ctx); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}

// Run simulates sc (prepared: see Scenario.Prepare) with one strategy at
// one sync interval (ns; ignored by local-only and central). progress, when
// not nil, is called now and then with the fraction of simulated time done.
func (s *Simulator) Run(ctx context.Context, sc *Scenario, strategy string, interval time.Duration, seed uint64, progress func(float64)) (Result, error) {
	return s.run(ctx, sc, strategy, interval, seed, progress, false)
}

// run is Run, recording the first key's Timeline when timeline is set.
func (s *Simulator) run(ctx context.Context, sc *Scenario, strategy string, interval time.Duration, seed uint64, progress func(float64), timeline bool) (Result, error) {
	if !validStrategy(strategy) {
		return Result{}, fmt.Errorf("sim: unknown strategy %q", strategy)
	}
	if interval <= 0 {
		return Result{}, fmt.Errorf("sim: sync interval must be positive, got %v", interval)
	}
	if len(sc.cfg.Limiters) == 0 {
		if err := sc.Prepare(); err != nil {
			return Result{}, err
		}
	}
	e := &engine{ctx: ctx, sc: sc, strategy: strategy, interval: int64(interval), seed: seed, rt: s.rt, progress: progress,
		timeline: timeline, strand: s.StrandBudget, isosPerKey: s.MaxIsolatesPerKey}
	defer e.close()
	if err := e.setup(); err != nil {
		return Result{}, err
	}
	if err := e.run(); err != nil {
		return Result{}, err
	}
	return e.res, nil
}

// SweepOptions configure Sweep.
type SweepOptions struct {
	// Strategies to run; default the scenario's.
	Strategies []string
	// Intervals to sweep; default the scenario's Sync.
	Intervals []time.Duration
	// Seed of every run. The same seed gives the same results.
	Seed uint64
	// Parallel is the number of runs at once. Default 1. Results do not
	// depend on it.
	Parallel int
	// Progress, when set, is called with the fraction of the sweep done
	// (from several goroutines when Parallel > 1, serialized).
	Progress func(float64)
	// Timeline records, in each Result, what the run's first key admitted
	// per window (Result.Timeline, at most MaxTimelineWindows windows:
	// 32 KiB per result). Default false.
	Timeline bool
}

// Sweep runs every strategy at every interval and returns the results in
// (strategy, interval) order. local-only and central do not depend on the
// interval; they run once and their result is repeated for every interval.
func (s *Simulator) Sweep(ctx context.Context, sc *Scenario, o SweepOptions) ([]Result, error) {
	if o.Strategies == nil {
		o.Strategies = sc.Strategies
	}
	if o.Intervals == nil {
		for _, d := range sc.Sync {
			o.Intervals = append(o.Intervals, time.Duration(d))
		}
	}
	for _, d := range o.Intervals {
		if err := CheckSyncInterval(d); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
	}
	if o.Parallel < 1 {
		o.Parallel = 1
	}
	type job struct {
		strategy string
		interval time.Duration
		slots    []int
	}
	res := make([]Result, len(o.Strategies)*len(o.Intervals))
	var jobs []job
	for i, st := range o.Strategies {
		if st == LocalOnly || st == Central {
			j := job{strategy: st, interval: o.Intervals[0]}
			for k := range o.Intervals {
				j.slots = append(j.slots, i*len(o.Intervals)+k)
			}
			jobs = append(jobs, j)
			continue
		}
		for k, iv := range o.Intervals {
			jobs = append(jobs, job{strategy: st, interval: iv, slots: []int{i*len(o.Intervals) + k}})
		}
	}
	var mu sync.Mutex
	done := make([]float64, len(jobs))
	report := func(j int, f float64) {
		if o.Progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		done[j] = f
		var sum float64
		for _, d := range done {
			sum += d
		}
		o.Progress(sum / float64(len(jobs)))
	}
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, o.Parallel)
	var wg sync.WaitGroup
	for j := range jobs {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			jb := jobs[j]
			r, err := s.run(ctx, sc, jb.strategy, jb.interval, o.Seed, func(f float64) { report(j, f) }, o.Timeline)
			if err != nil {
				errs[j] = fmt.Errorf("sim: %s at %v: %w", jb.strategy, jb.interval, err)
				return
			}
			report(j, 1)
			for _, slot := range jb.slots {
				r.Sync = Duration(o.Intervals[slot%len(o.Intervals)])
				res[slot] = r
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return res, nil
}
