package sim

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// The corpus is a set of scenarios shaped like production traffic
// (sim/scenarios/corpus/): heavy-tailed bursts at two densities, a step,
// a ramp, sustained overload, sparse and under-the-limit traffic, many
// keys with Zipf popularity, a long quota, the 6 req/s LLM case and a
// replayed counts trace. A change to how isolates decide is judged on all
// of it, over several seeds, never on one scenario.

// CorpusScenarios returns the names of the corpus scenarios, sorted; each
// loads with Builtin("corpus/" + name).
func CorpusScenarios() []string { return embeddedScenarios("scenarios/corpus") }

// CorpusRow is one scenario and strategy of a corpus run, over several
// seeds: the worst-window figures are the worst over the seeds, the
// others the mean.
type CorpusRow struct {
	Scenario string   `json:"scenario"`
	Strategy string   `json:"strategy"`
	Sync     Duration `json:"sync_interval"`
	Seeds    int      `json:"seeds"`
	// Overloaded reports whether the offered cost exceeded the capacity,
	// summed over key-windows.
	Overloaded bool `json:"overloaded"`
	// DecisionsPerIsolate is decisions per second per isolate.
	DecisionsPerIsolate float64 `json:"decisions_per_isolate_per_sec"`
	WorstOverrunPct     float64 `json:"worst_overrun_pct"`
	P99OverrunPct       float64 `json:"p99_overrun_pct"`
	OverWindowsPct      float64 `json:"over_windows_pct"`
	UnservedPct         float64 `json:"unserved_with_room_pct"`
	Utilisation         float64 `json:"utilisation_pct"`
	SyncPerDecision     float64 `json:"sync_per_decision_pct"`
	// SyncCauses splits SyncPerDecision by what started each request.
	SyncCauses SyncCausesPct `json:"sync_causes_pct"`
	// StrandedPct is Result.StrandedPct: budget stranded in leases while
	// demand was refused, % of the windows' bounds (Result.Unserved).
	StrandedPct float64 `json:"stranded_pct"`
	// WaitedPct is Result.WaitedPct: the share of decisions that waited.
	WaitedPct float64 `json:"waited_pct"`
	// WaitedDeniedPct is Result.WaitedDeniedPct: the share of decisions
	// that waited and were denied (a part of WaitedPct).
	WaitedDeniedPct float64  `json:"waited_denied_pct"`
	WaitP50         Duration `json:"wait_p50"`
	WaitP99         Duration `json:"wait_p99"`
	// RemainingErrPct is Result.RemainingErrPct (the mean over seeds),
	// RemainingHighP99Pct Result.RemainingHighP99Pct (the worst seed's).
	RemainingErrPct     float64 `json:"remaining_err_pct"`
	RemainingHighP99Pct float64 `json:"remaining_high_p99_pct"`
	// CapacityPerWindow is the mean capacity of a key-window (cost units):
	// from TargetBusyUnits on, Misses checks the wait p50 and waited %.
	CapacityPerWindow float64 `json:"capacity_per_window"`
	// RoundTrip is the scenario's median round trip (twice the one-way
	// latency's mean or median), the bound of WaitP99 in Misses.
	RoundTrip Duration `json:"round_trip"`
}

// Targets of a limiter that users can trust without knowing their
// traffic: every corpus row of the default mode should meet them.
const (
	TargetWorstPct       = 1.0   // worst key-window, % over the limit
	TargetUtilisationPct = 97.0  // when offered exceeds the limit
	TargetUnservedPct    = 1.0   // when it does not
	TargetSyncPct        = 100.0 // sync requests per decision, %, everywhere
	TargetBusySyncPct    = 5.0   // the same where isolates see >= 100 decisions/s
	// TargetBusyUnits is the capacity per key-window (cost units) from
	// which a row must also decide its median request without waiting
	// (wait p50 = 0) and have at most TargetWaitedPct of its decisions
	// wait.
	TargetBusyUnits = 100.0
	TargetWaitedPct = 25.0 // % of decisions that waited, rows of >= TargetBusyUnits
)

// Misses lists the targets the row misses (empty when it meets all).
func (r CorpusRow) Misses() []string {
	var m []string
	if r.WorstOverrunPct > TargetWorstPct {
		m = append(m, fmt.Sprintf("worst %.1f%%", r.WorstOverrunPct))
	}
	if r.Overloaded && r.Utilisation < TargetUtilisationPct {
		m = append(m, fmt.Sprintf("util %.1f%%", r.Utilisation))
	}
	if !r.Overloaded && r.UnservedPct > TargetUnservedPct {
		m = append(m, fmt.Sprintf("unserved %.1f%%", r.UnservedPct))
	}
	if !withinWait(r.WaitP99, r.RoundTrip) {
		m = append(m, "wait p99 "+fmtDur(int64(r.WaitP99)))
	}
	if r.CapacityPerWindow >= TargetBusyUnits {
		if r.WaitP50 > 0 {
			m = append(m, "wait p50 "+fmtDur(int64(r.WaitP50)))
		}
		if r.WaitedPct > TargetWaitedPct {
			m = append(m, fmt.Sprintf("waited %.0f%%", r.WaitedPct))
		}
	}
	if r.SyncPerDecision > TargetSyncPct || (r.DecisionsPerIsolate >= 100 && r.SyncPerDecision > TargetBusySyncPct) {
		m = append(m, fmt.Sprintf("sync %.0f%%", r.SyncPerDecision))
	}
	return m
}

// CorpusOptions configure RunCorpus.
type CorpusOptions struct {
	// Strategies to run. Default AllStrategies.
	Strategies []string
	// Interval is the sync interval. Default 100ms.
	Interval time.Duration
	// Seeds each scenario runs with. Default 1, 2, 3.
	Seeds []uint64
	// Parallel is the number of runs at once. Default 1.
	Parallel int
	// Progress, when set, is called with the fraction done.
	Progress func(float64)
}

// RunCorpus runs every scenario with every strategy and seed.
func (s *Simulator) RunCorpus(ctx context.Context, scs []*Scenario, o CorpusOptions) ([]CorpusRow, error) {
	if len(o.Strategies) == 0 {
		o.Strategies = AllStrategies
	}
	if o.Interval <= 0 {
		o.Interval = 100 * time.Millisecond
	}
	if len(o.Seeds) == 0 {
		o.Seeds = []uint64{1, 2, 3}
	}
	var rows []CorpusRow
	total := float64(len(scs) * len(o.Seeds))
	done := 0.0
	for _, sc := range scs {
		per := make([][]Result, len(o.Strategies))
		for _, seed := range o.Seeds {
			rs, err := s.Sweep(ctx, sc, SweepOptions{Strategies: o.Strategies, Intervals: []time.Duration{o.Interval},
				Seed: seed, Parallel: o.Parallel, Progress: func(f float64) {
					if o.Progress != nil {
						o.Progress((done + f) / total)
					}
				}})
			if err != nil {
				return nil, fmt.Errorf("sim: corpus %s: %w", sc.Name, err)
			}
			done++
			for i, r := range rs {
				per[i] = append(per[i], r)
			}
		}
		for i, rs := range per {
			rows = append(rows, aggregate(sc, o.Strategies[i], rs))
		}
	}
	return rows, nil
}

// aggregate folds the results of one scenario and strategy over seeds.
func aggregate(sc *Scenario, strategy string, rs []Result) CorpusRow {
	row := CorpusRow{Scenario: sc.Name, Strategy: strategy, Sync: rs[0].Sync, Seeds: len(rs),
		RoundTrip: roundTrip(sc)}
	n := float64(len(rs))
	var offered, capacity, windows int64
	var p50, p99 float64
	for _, r := range rs {
		row.WorstOverrunPct = math.Max(row.WorstOverrunPct, r.WorstOverrunPct)
		row.P99OverrunPct = math.Max(row.P99OverrunPct, r.P99OverrunPct)
		row.OverWindowsPct += r.OverWindowsPct / n
		row.UnservedPct += r.UnservedPct / n
		row.Utilisation += r.Utilisation / n
		row.SyncPerDecision += r.SyncPerDecision / n
		row.SyncCauses.add(&r, 1/n)
		row.StrandedPct += r.StrandedPct / n
		row.WaitedPct += r.WaitedPct / n
		row.WaitedDeniedPct += r.WaitedDeniedPct / n
		row.RemainingErrPct += r.RemainingErrPct / n
		row.RemainingHighP99Pct = math.Max(row.RemainingHighP99Pct, r.RemainingHighP99Pct)
		row.DecisionsPerIsolate += float64(r.Requests) / (float64(r.Duration) / 1e9) / float64(r.Isolates) / n
		p50 += float64(r.WaitP50) / n
		p99 += float64(r.WaitP99) / n
		offered += r.Offered
		capacity += r.Capacity
		windows += r.Windows
	}
	row.WaitP50, row.WaitP99 = Duration(p50), Duration(p99)
	if windows > 0 {
		row.CapacityPerWindow = float64(capacity) / float64(windows)
	}
	row.Overloaded = offered > capacity
	return row
}

// roundTrip is sc's median round trip: twice the one-way latency's mean
// (fixed, uniform) or median (lognormal).
func roundTrip(sc *Scenario) Duration { return 2 * sc.Network.Latency.Mean }

// WriteCorpusTable prints corpus rows as a table, with the targets each
// row misses.
func WriteCorpusTable(w io.Writer, rows []CorpusRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tstrategy\tdec/s/iso\tworst win %\tp99 win %\twins over %\tunserved %\tutil %\tstranded %\tsync/dec %\twaited %\twait p50\twait p99\tmisses")
	for _, r := range rows {
		miss := strings.Join(r.Misses(), ", ")
		if miss == "" {
			miss = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.2f\t%.1f\t%.1f\t%s\t%s\t%s\n", r.Scenario, r.Strategy,
			r.DecisionsPerIsolate, r.WorstOverrunPct, r.P99OverrunPct, r.OverWindowsPct, r.UnservedPct, r.Utilisation,
			r.StrandedPct, r.SyncPerDecision, r.WaitedPct, fmtDur(int64(r.WaitP50)), fmtDur(int64(r.WaitP99)), miss)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("sim: corpus table: %w", err)
	}
	return nil
}
