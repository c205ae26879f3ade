package sim

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Duration is a time.Duration written in JSON as a Go duration string
// ("100ms", "24h").
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string (or a number of nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("sim: duration: want a string like \"100ms\": %w", err)
		}
		*d = Duration(n)
		return nil
	}
	v, err := wire.ParseDuration(s) // days too: "1d", "1d12h"
	if err != nil {
		return fmt.Errorf("sim: duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Scenario.Background values.
const (
	BackgroundTimers   = "timers"
	BackgroundRequests = "requests"
)

// Strategy names.
const (
	LocalOnly   = "local-only"
	Central     = "central"
	Location    = "location"
	Approximate = "approximate"
	Strict      = "strict"
	Auto        = "auto"
)

// AllStrategies lists every strategy in report order. Auto is edgelimit's
// default mode (wire.Auto).
var AllStrategies = []string{LocalOnly, Central, Location, Approximate, Strict, Auto}

// FeedbackStrategies are the edgelimit strategies whose isolates observe
// the upstream's answers (see Upstream); they run only with an upstream.
var FeedbackStrategies = []string{Approximate + FeedbackSuffix, Strict + FeedbackSuffix, Auto + FeedbackSuffix}

// Fail policies (Scenario.FailPolicy): what an isolate whose view is stale
// (no successful sync for syncloop's StaleAfter, 3 intervals) does.
const (
	FailOpen       = wire.FailOpen       // decide from the last view (default)
	FailClosed     = wire.FailClosed     // deny every request
	FailLocalShare = wire.FailLocalShare // admit up to limit/isolates per window per key
)

// Scenario is a simulation scenario, read from a JSON file. Zero fields
// take the documented defaults (see EnsureDefaults). Example (the shipped
// scenarios in sim/scenarios/ are complete examples):
//
//	{"name": "llm-6rps",
//	 "config": {"limiters": [{"name": "llm", "algorithm": "fixed_window", "limit": 6, "period": "1s"}]},
//	 "isolates": 64, "duration": "60s",
//	 "traffic": [{"limiter": "llm", "rate": 12, "arrival": "poisson", "keys": {"dist": "single"}}],
//	 "network": {"latency": {"dist": "lognormal", "mean": "30ms", "sigma": 0.5}, "loss": 0.01}}
type Scenario struct {
	// Name names the scenario in reports.
	Name string `json:"name"`
	// Description is free text.
	Description string `json:"description,omitempty"`
	// Config holds the limiters, in the same form as edgelimit's config
	// file (wire.FileConfig). Strategies override each limiter's mode.
	Config wire.FileConfig `json:"config"`
	// Isolates is the number of isolates. Default 64.
	Isolates int `json:"isolates,omitempty"`
	// Locations groups the isolates: isolate i is in location i %
	// Locations. Default 8, at most Isolates.
	Locations int `json:"locations,omitempty"`
	// Duration is the simulated time. Default 60s.
	Duration Duration `json:"duration,omitempty"`
	// Sync lists the sync intervals to sweep. Default 10ms, 50ms, 100ms,
	// 250ms, 500ms, 1s.
	Sync []Duration `json:"sync,omitempty"`
	// Strategies lists the strategies to run. Default all (AllStrategies).
	Strategies []string `json:"strategies,omitempty"`
	// Traffic lists the traffic sources, merged in time order. Default
	// (when Trace is empty too) one Poisson source at twice the first
	// limiter's rate on a single key.
	Traffic []Traffic `json:"traffic,omitempty"`
	// Trace is a trace file to replay, relative to the scenario file. It
	// is replayed in addition to Traffic. Without a Duration, the run
	// lasts the trace's span; requests past the run's end are counted
	// (Result.TraceNotReplayed) and warned about.
	Trace string `json:"trace,omitempty"`
	// TraceFormat is the trace's format: "requests" (one request per
	// line, CSV; see ParseTrace), "jsonl" (one request per line, JSON) or
	// "counts" (requests per bin, e.g. per second: the form published
	// traces take). Default: from the content.
	TraceFormat string `json:"trace_format,omitempty"`
	// TraceScale multiplies a counts trace's counts. Default 1; a request
	// trace (CSV or JSON lines) is replayed as recorded and refuses any
	// other value.
	TraceScale float64 `json:"trace_scale,omitempty"`
	// TraceOffset skips the start of a trace: a counts trace's first bins,
	// a request trace's requests before it (the rest shifted to start
	// there). Default 0.
	TraceOffset Duration `json:"trace_offset,omitempty"`
	// TraceBin is the time one count of a counts trace covers. Default 1s.
	TraceBin Duration `json:"trace_bin,omitempty"`
	// TraceLimiter names the limiter a counts trace's requests ask.
	// Default the first.
	TraceLimiter string `json:"trace_limiter,omitempty"`
	// TraceKeys chooses the key of each request of a counts trace.
	// Default one key, "trace-0".
	TraceKeys Keys `json:"trace_keys"`
	// Network models the isolate-coordinator network.
	Network Network `json:"network"`
	// FailPolicy is FailOpen (default), FailClosed or FailLocalShare: the
	// default of limiters that set none (as the edge host's
	// --fail-policy), applied once an isolate's view is stale.
	FailPolicy string `json:"fail_policy,omitempty"`
	// Background is when the isolates sync, as the JavaScript package's
	// background option: "timers" (default: at every interval, as the
	// edge host and Node do) or "requests" (as Cloudflare Workers do: only
	// while a request runs, or within three intervals after one, one sync
	// per request; an isolate without requests never syncs).
	Background string `json:"background,omitempty"`
	// RetryWait bounds how long a request the module answers with
	// SyncRetry is held for syncs (as the edge host's --retry-wait).
	// Default 1s; negative: such a request is denied at once.
	RetryWait Duration `json:"retry_wait,omitempty"`
	// Churn evicts isolates (see Churn).
	Churn Churn `json:"churn"`
	// Kills kill isolates mid-run, as kill -9 does (see Kill); none by
	// default.
	Kills []Kill `json:"kills,omitempty"`
	// Upstream models the API behind the limiters (see Upstream); nil
	// means none. With one, the default strategies add the feedback
	// variants (FeedbackStrategies).
	Upstream *Upstream `json:"upstream,omitempty"`
	// SyncJitter is syncloop.Options.Jitter (fraction of the interval).
	// Default 0.1.
	SyncJitter float64 `json:"sync_jitter,omitempty"`
	// EarlySpacing is the least time between two early syncs of an
	// isolate (syncloop.Options.MinSpacing). Default interval/10.
	EarlySpacing Duration `json:"early_spacing,omitempty"`

	dir      string       // directory of the scenario file, for Trace
	embedDir string       // directory of a built-in scenario in the embedded files
	trace    []traceEvent // loaded request trace, when Trace is set
	counts   []float64    // loaded counts trace (after the offset), when Trace is set
	cfg      wire.Config  // validated Config
	spanned  bool         // Prepare set Duration to the trace's span (SetTraceReading)
}

// Traffic is one traffic source.
type Traffic struct {
	// Limiter names the limiter the requests ask. Default the first.
	Limiter string `json:"limiter,omitempty"`
	// Rate is the mean request rate, requests per second (the base rate
	// of Pattern). Required, > 0.
	Rate float64 `json:"rate"`
	// Arrival is "poisson" (default: exponential gaps) or "constant"
	// (evenly spaced).
	Arrival string `json:"arrival,omitempty"`
	// Pattern shapes the rate over time.
	Pattern Pattern `json:"pattern"`
	// Keys chooses each request's key.
	Keys Keys `json:"keys"`
	// Cost is each request's cost. Default 1.
	Cost int64 `json:"cost,omitempty"`
	// Skew sends part of the traffic to hot isolates.
	Skew Skew `json:"skew"`
}

// Pattern shapes a source's rate over time.
type Pattern struct {
	// Kind is "steady" (default), "onoff" (Rate during On, nothing during
	// Off), "pareto" (on/off with periods drawn from a Pareto distribution
	// of shape Shape and means On and Off: heavy-tailed bursts), "diurnal" (Rate*(1-Amplitude*cos(2πt/Period)): a slow ramp up
	// and down) or "flash" (Rate, then Factor*Rate reached linearly over
	// Ramp at time At, held for Hold, then Rate again).
	Kind string `json:"kind,omitempty"`
	// On and Off are the on/off periods. Defaults 1s and 4s.
	On  Duration `json:"on,omitempty"`
	Off Duration `json:"off,omitempty"`
	// Period is the diurnal period. Default the scenario's duration.
	Period Duration `json:"period,omitempty"`
	// Amplitude is the diurnal swing, in [0, 1). Default 0.8.
	Amplitude float64 `json:"amplitude,omitempty"`
	// At is when the flash crowd starts. Default a third of the duration.
	At Duration `json:"at,omitempty"`
	// Factor multiplies the rate in a flash crowd. Default 10.
	Factor float64 `json:"factor,omitempty"`
	// Ramp is how long the flash crowd takes to reach Factor. Default 1s.
	Ramp Duration `json:"ramp,omitempty"`
	// Hold is how long the flash crowd lasts at Factor (a step that
	// stays: a Hold past the duration). Default 10s.
	Hold Duration `json:"hold,omitempty"`
	// Shape is the Pareto shape of "pareto" periods, > 1 (the smaller,
	// the heavier the tail). Default 1.5.
	Shape float64 `json:"shape,omitempty"`
}

// Keys is a key popularity model.
type Keys struct {
	// Dist is "single" (default: one key), "uniform" (over Count keys) or
	// "zipf" (over Count keys, key i with probability ∝ 1/(1+i)^S).
	Dist string `json:"dist,omitempty"`
	// Count is the number of keys. Default 1000 (uniform, zipf).
	Count int `json:"count,omitempty"`
	// S is the Zipf exponent, > 1. Default 1.1.
	S float64 `json:"s,omitempty"`
	// Prefix starts every key's name ("key-" by default; a single key is
	// the prefix followed by 0).
	Prefix string `json:"prefix,omitempty"`
}

func (k *Keys) ensureDefaults() {
	if k.Dist == "" {
		k.Dist = "single"
	}
	if k.Count == 0 {
		k.Count = 1000
	}
	if k.Dist == "single" {
		k.Count = 1
	}
	if k.S == 0 {
		k.S = 1.1
	}
	if k.Prefix == "" {
		k.Prefix = "key-"
	}
}

// MaxKeys is the most keys a scenario's traffic sources and trace keys
// may name in all (Keys.Count summed). Each key takes the simulator about
// 350 bytes for each run in flight, made before it starts: 10,000,000
// keys took 5 GB and 18 s before a run of 2 s began (1,000,000: 360 MB).
const MaxKeys = 1_000_000

// MaxIsolates is the most isolates a scenario may run. Each is an instance
// of the module with its own linear memory, about 300 KB while it runs
// (10,000 isolates: 2.97 GB of RSS; 20,000: 4.65 GB).
const MaxIsolates = 20_000

// validate reports the problems of k, named with prefix p.
func (k *Keys) validate(p string, bad func(string, ...any)) {
	switch k.Dist {
	case "single", "uniform", "zipf":
	default:
		bad("%s.dist: want single, uniform or zipf, got %q", p, k.Dist)
	}
	if k.Count < 1 || k.Count > MaxKeys {
		bad("%s.count must be between 1 and %d", p, MaxKeys)
	}
	if k.Dist == "zipf" && !(k.S > 1) {
		bad("%s.s must be > 1 for zipf", p)
	}
	if len(k.Prefix)+8 > wire.MaxKeyLen {
		bad("%s.prefix too long", p)
	}
}

// Skew sends a share of a source's requests to hot isolates; the rest is
// spread uniformly over all isolates.
type Skew struct {
	// Share is the fraction of requests sent to the hot isolates, [0, 1].
	// 0 (default) means no skew.
	Share float64 `json:"share,omitempty"`
	// Isolates is the number of hot isolates (isolates 0..Isolates-1).
	// Default 1.
	Isolates int `json:"isolates,omitempty"`
	// Location makes location 0's isolates the hot ones instead.
	Location bool `json:"location,omitempty"`
}

// Network models the one-way trip of every message between an isolate
// and the coordinator.
type Network struct {
	// Latency is the one-way latency distribution.
	Latency Latency `json:"latency"`
	// Jitter adds a uniform [-Jitter, +Jitter] to every latency (clamped
	// at 0). Default 0.
	Jitter Duration `json:"jitter,omitempty"`
	// Loss is the probability that a message (batch or reply) is lost.
	// The sender times out and retries with the same batch. Default 0.
	Loss float64 `json:"loss,omitempty"`
	// Timeout is how long an isolate waits for a reply. Default 1s.
	Timeout Duration `json:"timeout,omitempty"`
	// Partitions cut isolates or locations off the coordinator.
	Partitions []Partition `json:"partitions,omitempty"`
}

// Latency is a one-way latency distribution.
type Latency struct {
	// Dist is "fixed" (default: Mean), "uniform" (in [Min, Max]) or
	// "lognormal" (median Mean, shape Sigma).
	Dist string `json:"dist,omitempty"`
	// Mean is the fixed latency or the lognormal median. Default 20ms.
	Mean Duration `json:"mean,omitempty"`
	// Min and Max bound the uniform distribution. Defaults Mean/2, 3*Mean/2.
	Min Duration `json:"min,omitempty"`
	Max Duration `json:"max,omitempty"`
	// Sigma is the lognormal shape. Default 0.5.
	Sigma float64 `json:"sigma,omitempty"`
}

// Partition cuts one isolate or one location off the coordinator from
// Start for Duration: every message to or from it is lost.
type Partition struct {
	// Isolate is the isolate index cut off (0 to Isolates-1), or absent.
	Isolate *int `json:"isolate,omitempty"`
	// Location is the location index cut off (0 to Locations-1), or
	// absent.
	Location *int `json:"location,omitempty"`
	// Start and Duration place the partition in simulated time.
	Start    Duration `json:"start"`
	Duration Duration `json:"duration"`
}

// Churn evicts isolates as edge runtimes do: each isolate lives an
// exponentially distributed time, then is replaced by a cold one with a new
// id; its unsynced (and in-flight) deltas are lost.
type Churn struct {
	// Lifetime is the mean isolate lifetime, at least 100ms. 0 (default)
	// means no churn.
	Lifetime Duration `json:"lifetime,omitempty"`
}

// DefaultSync is the default sweep of sync intervals.
var DefaultSync = []Duration{Duration(10 * time.Millisecond), Duration(50 * time.Millisecond),
	Duration(100 * time.Millisecond), Duration(250 * time.Millisecond), Duration(500 * time.Millisecond), Duration(time.Second)}

// EnsureDefaults fills the zero fields of s with the defaults.
func (s *Scenario) EnsureDefaults() {
	if s.Name == "" {
		s.Name = "scenario"
	}
	if s.Isolates == 0 {
		s.Isolates = 64
	}
	if s.Locations == 0 {
		s.Locations = 8
	}
	if s.Locations > s.Isolates && s.Isolates > 0 {
		s.Locations = s.Isolates
	}
	if s.Duration == 0 {
		s.Duration = Duration(60 * time.Second)
	}
	if len(s.Sync) == 0 {
		s.Sync = append([]Duration(nil), DefaultSync...)
	}
	if len(s.Strategies) == 0 {
		s.Strategies = append([]string(nil), AllStrategies...)
		if s.Upstream != nil {
			s.Strategies = append(s.Strategies, FeedbackStrategies...)
		}
	}
	if s.Upstream != nil {
		p := time.Second
		if len(s.Config.Limiters) > 0 {
			if d, err := time.ParseDuration(s.Config.Limiters[0].Period); err == nil && d > 0 {
				p = d
			}
		}
		s.Upstream.ensureDefaults(p)
	}
	if s.FailPolicy == "" {
		s.FailPolicy = FailOpen
	}
	if s.Background == "" {
		s.Background = BackgroundTimers
	}
	if s.SyncJitter == 0 {
		s.SyncJitter = 0.1
	}
	n := &s.Network
	if n.Latency.Dist == "" {
		n.Latency.Dist = "fixed"
	}
	if n.Latency.Mean == 0 {
		n.Latency.Mean = Duration(20 * time.Millisecond)
	}
	if n.Latency.Min == 0 && n.Latency.Max == 0 {
		n.Latency.Min, n.Latency.Max = n.Latency.Mean/2, n.Latency.Mean*3/2
	}
	if n.Latency.Sigma == 0 {
		n.Latency.Sigma = 0.5
	}
	if n.Timeout == 0 {
		n.Timeout = Duration(time.Second)
	}
	if s.TraceScale == 0 {
		s.TraceScale = 1
	}
	if s.TraceBin == 0 {
		s.TraceBin = Duration(time.Second)
	}
	if s.TraceLimiter == "" && len(s.Config.Limiters) > 0 {
		s.TraceLimiter = s.Config.Limiters[0].Name
	}
	if s.TraceKeys.Prefix == "" {
		s.TraceKeys.Prefix = "trace-"
	}
	s.TraceKeys.ensureDefaults()
	if len(s.Traffic) == 0 && s.Trace == "" && len(s.Config.Limiters) > 0 {
		l := s.Config.Limiters[0]
		rate := 2 * float64(l.Limit)
		if d, err := time.ParseDuration(l.Period); err == nil && d > 0 {
			rate = 2 * float64(l.Limit) / d.Seconds()
		}
		s.Traffic = []Traffic{{Limiter: l.Name, Rate: rate}}
	}
	for i := range s.Traffic {
		t := &s.Traffic[i]
		if t.Limiter == "" && len(s.Config.Limiters) > 0 {
			t.Limiter = s.Config.Limiters[0].Name
		}
		if t.Arrival == "" {
			t.Arrival = "poisson"
		}
		if t.Cost == 0 {
			t.Cost = 1
		}
		p := &t.Pattern
		if p.Kind == "" {
			p.Kind = "steady"
		}
		if p.On == 0 {
			p.On = Duration(time.Second)
		}
		if p.Off == 0 {
			p.Off = Duration(4 * time.Second)
		}
		if p.Period == 0 {
			p.Period = s.Duration
		}
		if p.Amplitude == 0 {
			p.Amplitude = 0.8
		}
		if p.At == 0 {
			p.At = s.Duration / 3
		}
		if p.Factor == 0 {
			p.Factor = 10
		}
		if p.Ramp == 0 {
			p.Ramp = Duration(time.Second)
		}
		if p.Hold == 0 {
			p.Hold = Duration(10 * time.Second)
		}
		if p.Shape == 0 {
			p.Shape = 1.5
		}
		t.Keys.ensureDefaults()
		if t.Skew.Isolates == 0 {
			t.Skew.Isolates = 1
		}
	}
}

// Validate reports every problem of s (after EnsureDefaults), one joined
// error, or nil. It also converts Config to the wire form.
func (s *Scenario) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("sim: scenario: "+format, a...)) }
	cfg, err := s.Config.Config()
	if err != nil {
		errs = append(errs, fmt.Errorf("sim: scenario: config: %w", err))
	}
	s.cfg = cfg
	if s.Isolates < 1 || s.Isolates > MaxIsolates {
		// Each isolate is a wasm instance with its own memory, about 300
		// KB: 100,000 (the bound before) passed 6 GB in 24 s and would
		// have needed about 18.
		bad("isolates must be between 1 and %d (each is a module instance of about 300 KB), got %d", MaxIsolates, s.Isolates)
	}
	if s.Locations < 1 {
		bad("locations must be >= 1, got %d", s.Locations)
	}
	if s.Duration <= 0 {
		bad("duration must be positive")
	}
	seenSync := map[Duration]bool{}
	for _, d := range s.Sync {
		if err := CheckSyncInterval(time.Duration(d)); err != nil {
			bad("%v", err)
		}
		if seenSync[d] {
			// (Each ran again, and the table showed it twice.)
			bad("sync interval %v is listed twice", time.Duration(d))
		}
		seenSync[d] = true
	}
	seenStrategy := map[string]bool{}
	for _, st := range s.Strategies {
		if !validStrategy(st) {
			bad("unknown strategy %q (want one of %s)", st, strings.Join(AllStrategies, ", "))
		}
		if seenStrategy[st] {
			bad("strategy %q is listed twice", st)
		}
		seenStrategy[st] = true
	}
	switch s.FailPolicy {
	case FailOpen, FailClosed, FailLocalShare:
	default:
		bad("unknown fail_policy %q (want open, closed or local-share)", s.FailPolicy)
	}
	if s.Background != BackgroundTimers && s.Background != BackgroundRequests {
		bad("background: want timers or requests, got %q", s.Background)
	}
	if s.Upstream != nil {
		s.Upstream.validate(bad)
	}
	if s.SyncJitter < 0 || s.SyncJitter >= 1 {
		bad("sync_jitter must be in [0, 1), got %v", s.SyncJitter)
	}
	if len(s.Traffic) == 0 && s.Trace == "" {
		bad("no traffic and no trace")
	}
	for i, t := range s.Traffic {
		p := fmt.Sprintf("traffic[%d]", i)
		if err == nil && cfg.Limiter(t.Limiter) == nil {
			bad("%s.limiter: unknown limiter %q", p, t.Limiter)
		}
		if !(t.Rate > 0) || t.Rate > 1e9 {
			bad("%s.rate must be in (0, 1e9] requests/s, got %v", p, t.Rate)
		}
		if t.Arrival != "poisson" && t.Arrival != "constant" {
			bad("%s.arrival: want poisson or constant, got %q", p, t.Arrival)
		}
		if t.Cost < 1 || t.Cost > wire.MaxCost {
			bad("%s.cost must be between 1 and 2^40, got %d", p, t.Cost)
		}
		switch t.Pattern.Kind {
		case "steady", "onoff", "pareto", "diurnal", "flash":
		default:
			bad("%s.pattern.kind: want steady, onoff, pareto, diurnal or flash, got %q", p, t.Pattern.Kind)
		}
		if t.Pattern.Amplitude < 0 || t.Pattern.Amplitude >= 1 {
			bad("%s.pattern.amplitude must be in [0, 1)", p)
		}
		if t.Pattern.Factor > 1000 {
			// (Drawn by thinning at the peak rate: a factor of 1e9 sent
			// no request at all, before the flash either.)
			bad("%s.pattern.factor must be at most 1000, got %g", p, t.Pattern.Factor)
		}
		if t.Pattern.Factor <= 0 || t.Pattern.On <= 0 || t.Pattern.Off < 0 || t.Pattern.Period <= 0 || t.Pattern.Ramp < 0 || t.Pattern.Hold < 0 {
			bad("%s.pattern: factor, on and period must be positive; off, ramp, hold >= 0", p)
		}
		if cycle := t.Pattern.On + t.Pattern.Off; (t.Pattern.Kind == "onoff" || t.Pattern.Kind == "pareto") && cycle < Duration(time.Millisecond) {
			// (on and off of 1 ns: 200 ms simulated took 14 s, and 5 s
			// did not end.)
			bad("%s.pattern: on + off must be at least 1ms, got %v", p, time.Duration(cycle))
		}
		if t.Pattern.Period < Duration(time.Millisecond) {
			bad("%s.pattern.period must be at least 1ms, got %v", p, time.Duration(t.Pattern.Period))
		}
		t.Keys.validate(p+".keys", bad)
		if t.Pattern.Kind == "pareto" && !(t.Pattern.Shape > 1) {
			bad("%s.pattern.shape must be > 1, got %v", p, t.Pattern.Shape)
		}
		if t.Skew.Share < 0 || t.Skew.Share > 1 || t.Skew.Isolates < 1 {
			bad("%s.skew: share must be in [0, 1] and isolates >= 1", p)
		}
	}
	total := 0
	for _, t := range s.Traffic {
		total += min(max(t.Keys.Count, 0), MaxKeys) // (one past it is said above)
	}
	if s.Trace != "" {
		total += min(max(s.TraceKeys.Count, 0), MaxKeys) // (a counts trace's)
	}
	if total > MaxKeys {
		bad("the traffic names %d keys in all (keys.count summed): at most %d", total, MaxKeys)
	}
	if s.Trace != "" {
		switch s.TraceFormat {
		case traceFormatAuto, TraceRequests, TraceJSONLines, TraceCounts:
		default:
			bad("trace_format: want requests, jsonl or counts, got %q", s.TraceFormat)
		}
		if !(s.TraceScale > 0) || s.TraceScale > 1e6 {
			bad("trace_scale must be in (0, 1e6], got %v", s.TraceScale)
		}
		if s.TraceOffset < 0 || s.TraceBin <= 0 {
			bad("trace_offset must be >= 0 and trace_bin positive")
		}
		if err == nil && cfg.Limiter(s.TraceLimiter) == nil {
			bad("trace_limiter: unknown limiter %q", s.TraceLimiter)
		}
		s.TraceKeys.validate("trace_keys", bad)
	}
	n := &s.Network
	switch n.Latency.Dist {
	case "fixed", "uniform", "lognormal":
	default:
		bad("network.latency.dist: want fixed, uniform or lognormal, got %q", n.Latency.Dist)
	}
	if n.Latency.Mean < 0 || n.Latency.Min < 0 || n.Latency.Max < n.Latency.Min || n.Latency.Sigma < 0 || n.Jitter < 0 {
		bad("network.latency: mean, min, sigma, jitter must be >= 0 and max >= min")
	}
	if n.Loss < 0 || n.Loss >= 1 {
		bad("network.loss must be in [0, 1), got %v", n.Loss)
	}
	if n.Timeout <= 0 {
		bad("network.timeout must be positive")
	}
	for i, p := range n.Partitions {
		if (p.Isolate == nil) == (p.Location == nil) {
			bad("network.partitions[%d]: set exactly one of isolate and location", i)
		}
		if p.Start < 0 || p.Duration <= 0 {
			bad("network.partitions[%d]: start must be >= 0 and duration positive", i)
		}
		// (One naming an isolate or a location the scenario does not
		// have was accepted, and cut nothing.)
		if p.Isolate != nil && (*p.Isolate < 0 || *p.Isolate >= s.Isolates) {
			bad("network.partitions[%d]: isolate %d is not one of the scenario's %d (0 to %d)", i, *p.Isolate, s.Isolates, s.Isolates-1)
		}
		if p.Location != nil && (*p.Location < 0 || *p.Location >= s.Locations) {
			bad("network.partitions[%d]: location %d is not one of the scenario's %d (0 to %d)", i, *p.Location, s.Locations, s.Locations-1)
		}
	}
	if s.EarlySpacing < 0 {
		bad("early_spacing must be >= 0, got %v", time.Duration(s.EarlySpacing))
	}
	if s.Churn.Lifetime < 0 || s.Churn.Lifetime > 0 && s.Churn.Lifetime < Duration(100*time.Millisecond) {
		// (1 ns replaced isolates for ever.)
		bad("churn.lifetime must be 0 (no churn) or at least 100ms, got %v", time.Duration(s.Churn.Lifetime))
	}
	s.validateKills(bad)
	return errors.Join(errs...)
}

func validStrategy(s string) bool {
	for _, a := range FeedbackStrategies {
		if a == s {
			return true
		}
	}
	for _, a := range AllStrategies {
		if a == s {
			return true
		}
	}
	return false
}

// ParseScenario parses a scenario's JSON bytes (unknown fields are
// errors), applies the defaults and validates it. dir resolves a relative
// Trace path; the trace is loaded.
func ParseScenario(data []byte, dir string) (*Scenario, error) {
	return parseScenario(data, dir, "scenarios")
}

// parseScenario is ParseScenario; a relative Trace of a scenario without
// a dir is read from embedDir of the built-in scenarios.
func parseScenario(data []byte, dir, embedDir string) (*Scenario, error) {
	var s Scenario
	s.embedDir = embedDir
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("sim: scenario: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		// Before, text after the object was ignored, and with it the
		// check of explicit zeros below ("isolates": 0 ran 64).
		return nil, errors.New("sim: scenario: the file holds more than one JSON object")
	}
	if err := wire.RepeatedJSONKey(data); err != nil {
		return nil, fmt.Errorf("sim: scenario: %w", err)
	}
	if err := explicitZeros(data); err != nil {
		return nil, err
	}
	s.dir = dir
	if err := s.Prepare(); err != nil {
		return nil, err
	}
	return &s, nil
}

// explicitZeros refuses a scenario file that writes 0 for a field whose
// absence takes a default: the defaults apply to absent fields, and an
// explicit "isolates": 0 ran 64 isolates, "duration": "0s" a minute.
func explicitZeros(data []byte) error {
	var top struct {
		Fields  map[string]json.RawMessage
		Traffic []map[string]json.RawMessage `json:"traffic"`
	}
	if json.Unmarshal(data, &top.Fields) != nil || json.Unmarshal(data, &top) != nil {
		return nil // (the decode before took it: not reached)
	}
	zero := func(m map[string]json.RawMessage, field string) bool {
		raw, ok := m[field]
		var d Duration // numbers and duration strings alike
		return ok && json.Unmarshal(raw, &d) == nil && d == 0
	}
	for _, f := range []string{"isolates", "locations", "duration"} {
		if zero(top.Fields, f) {
			return fmt.Errorf("sim: scenario: %s is 0: it must be positive (leave it out for the default)", f)
		}
	}
	for _, f := range []string{"strategies", "sync", "traffic"} {
		// An empty list took the default list: "strategies": [] ran all six.
		var list []json.RawMessage
		if raw, ok := top.Fields[f]; ok && json.Unmarshal(raw, &list) == nil && list != nil && len(list) == 0 {
			return fmt.Errorf("sim: scenario: %s is an empty list: name at least one (leave it out for the default)", f)
		}
	}
	for i, t := range top.Traffic {
		if zero(t, "cost") {
			return fmt.Errorf("sim: scenario: traffic[%d].cost is 0: it must be at least 1 (leave it out for 1)", i)
		}
	}
	return nil
}

// Prepare applies the defaults, validates s and loads its trace. A
// scenario with a trace and no duration lasts the trace's span.
func (s *Scenario) Prepare() error {
	spanDuration := s.Duration == 0 && s.Trace != ""
	s.EnsureDefaults()
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Trace == "" || s.trace != nil || s.counts != nil {
		return nil
	}
	p := s.Trace
	if !filepath.IsAbs(p) && s.dir != "" {
		p = filepath.Join(s.dir, p)
	}
	var data []byte
	var err error
	if s.dir == "" && !filepath.IsAbs(p) {
		data, err = builtin.ReadFile(path.Join(s.embedDir, p))
	}
	if s.dir != "" || filepath.IsAbs(p) || err != nil {
		data, err = os.ReadFile(p)
	}
	if err != nil {
		return fmt.Errorf("sim: scenario: trace: %w", err)
	}
	format := s.TraceFormat
	if format == traceFormatAuto {
		format = detectTraceFormat(data)
	}
	var span int64
	switch format {
	case TraceCounts:
		counts, err := parseCounts(data)
		if err != nil {
			return fmt.Errorf("%w (in %s)", err, p)
		}
		skip := min(int(int64(s.TraceOffset)/int64(s.TraceBin)), len(counts))
		s.counts = counts[skip:]
		if len(s.counts) == 0 {
			return fmt.Errorf("sim: scenario: trace_offset %v skips the whole trace (in %s)", time.Duration(s.TraceOffset), p)
		}
		span = int64(len(s.counts)) * int64(s.TraceBin)
	default:
		tr, err := ParseTrace(data, format == TraceJSONLines)
		if err != nil {
			return fmt.Errorf("%w (in %s, read as %s; set trace_format to choose)", err, p, format)
		}
		for _, ev := range tr {
			if s.cfg.Limiter(ev.limiter) == nil {
				return fmt.Errorf("sim: scenario: trace names unknown limiter %q", ev.limiter)
			}
		}
		if s.TraceScale != 1 {
			// (It was ignored: a request trace's requests are replayed as
			// recorded.)
			return fmt.Errorf("sim: scenario: trace_scale %v: only a counts trace can be scaled; %s is read as %s", s.TraceScale, p, format)
		}
		if off := int64(s.TraceOffset); off > 0 {
			skip := sort.Search(len(tr), func(i int) bool { return tr[i].t >= off })
			if tr = tr[skip:]; len(tr) == 0 {
				return fmt.Errorf("sim: scenario: trace_offset %v skips the whole trace (in %s)", time.Duration(off), p)
			}
			for i := range tr {
				tr[i].t -= off
			}
		}
		s.trace = tr
		span = tr[len(tr)-1].t + 1
	}
	if spanDuration {
		s.Duration, s.spanned = Duration(span), true
	}
	return nil
}

// SetTrace replaces the scenario's trace with the file at path (format,
// scale and offset as the trace_* fields; zero values take the defaults);
// the next Prepare loads it.
func (s *Scenario) SetTrace(path, format string, scale float64, offset Duration) {
	s.Trace, s.TraceFormat, s.TraceScale, s.TraceOffset = path, format, scale, offset
	s.trace, s.counts, s.dir = nil, nil, ""
	if abs, err := filepath.Abs(path); err == nil {
		s.Trace = abs
	}
}

// WireConfig returns the validated limiter configuration (after Prepare).
func (s *Scenario) WireConfig() wire.Config { return s.cfg }

// LoadScenario reads a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sim: scenario: %w", err)
	}
	// A UTF-8 byte order mark (editors on Windows write one) is no JSON.
	s, err := ParseScenario(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return s, nil
}

//go:embed scenarios
var builtin embed.FS

// DefaultScenario is the name of the built-in scenario `edgelimit sim` runs
// without flags.
const DefaultScenario = "default"

// BuiltinScenarios returns the names of the shipped scenarios, sorted.
func BuiltinScenarios() []string { return embeddedScenarios("scenarios") }

// embeddedScenarios returns the names of the scenario files in dir of the
// embedded files, sorted.
func embeddedScenarios(dir string) []string {
	ents, _ := builtin.ReadDir(dir)
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Builtin returns the shipped scenario name (a file in sim/scenarios/).
func Builtin(name string) (*Scenario, error) {
	data, err := builtin.ReadFile("scenarios/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("sim: no built-in scenario %q (have %s): %w", name, strings.Join(BuiltinScenarios(), ", "), err)
	}
	return parseScenario(data, "", path.Dir("scenarios/"+name))
}

// Encode returns s as indented JSON, in the format LoadScenario reads.
func (s *Scenario) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("sim: scenario: %w", err)
	}
	return append(b, '\n'), nil
}

// CheckSyncInterval reports an error for a sync interval outside 1ms-1h,
// the module's bounds (wire.Config.SyncInterval): 1 ns ran for ever.
func CheckSyncInterval(d time.Duration) error {
	if d < time.Millisecond || d > time.Hour {
		return fmt.Errorf("sync intervals must be between 1ms and 1h, got %v", d)
	}
	return nil
}
