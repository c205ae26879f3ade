package merge

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults of MergerOptions.
const (
	DefaultMaxCachedKeys      = 1 << 18 // 262144 key states
	DefaultMaxIsolatesPerKey  = 256
	DefaultMaxIsolateEntries  = 1 << 20 // 1048576 (key, isolate) entries
	DefaultMaxCachedIsolates  = 1 << 16 // 65536 high-water marks
	DefaultIsolateTTL         = 24 * time.Hour
	DefaultOrphanGrace        = 24 * time.Hour
	DefaultCheckpointBytes    = 64 << 20 // 64 MiB of log
	DefaultCheckpointInterval = 10 * time.Second
	DefaultLeaseLife          = time.Second
	DefaultLeaseGrace         = time.Second
	// MaxDurationOption is the longest MaxClockSkew, LeaseLife and
	// LeaseGrace Validate takes (1 h): a lease that lives longer strands a
	// dead edge's budget for that long, and a skew that large takes
	// batches cut in another hour.
	MaxDurationOption   = time.Hour
	DefaultStrandBudget = 0.01
	// DefaultCheckpointKeys is CheckpointKeys with the default
	// MaxCachedKeys: 131072.
	DefaultCheckpointKeys = DefaultMaxCachedKeys / 2
)

// MergerOptions bound the memory of a Merger. Zero fields take the
// defaults (EnsureDefaults); negative ones are errors (Validate).
type MergerOptions struct {
	// MaxCachedKeys is the most (limiter, key) states kept in memory, a
	// key of 100 bytes or more counting for 1 + len/100 (cacheWeight);
	// beyond it, states are evicted after a commit and re-read from the
	// Store on demand. Default DefaultMaxCachedKeys (262144).
	MaxCachedKeys int
	// MaxIsolatesPerKey is the most isolates remembered per key (for
	// View.Isolates and strict leases). Default DefaultMaxIsolatesPerKey
	// (256).
	MaxIsolatesPerKey int
	// MaxIsolateEntries is the most (key, isolate) entries in memory across
	// all keys; past it, new isolates of a key are not tracked (their
	// Isolates count is not raised and strict mode grants them no lease).
	// Default DefaultMaxIsolateEntries (1048576).
	MaxIsolateEntries int
	// MaxCachedIsolates is the most isolate high-water marks kept in memory.
	// Default DefaultMaxCachedIsolates (65536).
	MaxCachedIsolates int
	// IsolateTTL is how long an isolate may stay silent before GC deletes
	// its high-water mark. A batch retried after that is applied again, so
	// it must exceed any retry horizon. Default DefaultIsolateTTL (24 h).
	IsolateTTL time.Duration
	// OrphanGrace is how long GC keeps the key records of a limiter that
	// is no longer configured, from the first GC of this Merger (its
	// configuration): restored within it, the limiter keeps its counts.
	// Default DefaultOrphanGrace (24 h).
	OrphanGrace time.Duration
	// MaxClockSkew is how far an isolate's clock may run ahead of the
	// coordinator's: a batch cut later than now+MaxClockSkew, or a windowed
	// entry in a window past the coordinator's current one, or past the
	// next one when that starts later than now+MaxClockSkew, is refused
	// (see times.go). Default DefaultMaxClockSkew (2 s).
	MaxClockSkew time.Duration
	// NoResetNotices turns reset notices off (resetlog.go): replies carry
	// no reset generation, so isolates send no heartbeats and hear of a
	// reset only with a reply for the key. Default false (notices on).
	NoResetNotices bool
	// NoFullNotices turns full-window notices off (fullnotice.go): replies
	// carry views of their batch's keys only, so an isolate learns that a
	// key's window has counted its limit only by asking. Default false
	// (notices on); shared mode (Redis) sends none (fullnotice.go).
	NoFullNotices bool
	// Limits, when set, holds the limits in force at run time (limits.go):
	// the Merger adopts each new generation before its next operation.
	// Nil: the configuration's limits, fixed.
	Limits *Limits
	// ReportPerScope: isolate namespaces (bearer tokens, the scope of
	// ApplyAs) vote on a key's announced limit, rather than isolates, so
	// one token's clients cannot outvote another's (upstream.go,
	// agreedLimit). The coordinator sets it when several tokens may sync.
	// Default false.
	ReportPerScope bool
	// CheckpointKeys: a checkpoint is due once this many distinct keys and
	// isolates were logged since the previous one (see wal.go). Keys logged
	// but not checkpointed stay in memory, so this bounds the cache's
	// overshoot. Default MaxCachedKeys/2.
	CheckpointKeys int
	// CheckpointBytes: a checkpoint is due once the log since the previous
	// one holds this many bytes (what a restart after a crash replays).
	// Default DefaultCheckpointBytes (64 MiB).
	CheckpointBytes int64
	// CheckpointInterval: a checkpoint is due this long after the previous
	// one when anything was logged since. Default
	// DefaultCheckpointInterval (10 s).
	CheckpointInterval time.Duration
	// LeaseLife is how long an isolate may admit under a lease or standing
	// lease (leased limiters: strict, auto) after it cut the batch that
	// brought it, on its own clock (wire.View.Life); every grant renews
	// it. It bounds how long budget held by a dead or silent isolate
	// stays reserved, and what a dead isolate may have admitted without
	// reporting. A sparse isolate's standing unit over several windows
	// (wire.View.StandTo) lives until its span ends, at most
	// wire.MaxStandWindows lease lives. Default DefaultLeaseLife (1 s).
	LeaseLife time.Duration
	// LeaseGrace is how long after a lease's life the coordinator still
	// reserves it, for the isolate to report what it admitted under it
	// (its next sync, a round trip) and for clock drift. It must exceed
	// the isolates' sync interval plus a round trip. Default
	// DefaultLeaseGrace (1 s).
	LeaseGrace time.Duration
	// StrandBudget bounds what leased limiters hold ahead of need: an
	// isolate that is not busy gets a unit before it asks (and one to
	// start the next window with), so it decides its next request
	// without a round trip, while the budget such units are expected to
	// leave unused in windows that reach their limit stays within this
	// share of the limit (strand.go). 0 takes the default; a negative
	// value holds nothing ahead. Default DefaultStrandBudget (0.01, 1%).
	StrandBudget float64
}

// EnsureDefaults sets every zero field of o to its default.
func (o *MergerOptions) EnsureDefaults() {
	if o.MaxCachedKeys == 0 {
		o.MaxCachedKeys = DefaultMaxCachedKeys
	}
	if o.MaxIsolatesPerKey == 0 {
		o.MaxIsolatesPerKey = DefaultMaxIsolatesPerKey
	}
	if o.MaxIsolateEntries == 0 {
		o.MaxIsolateEntries = DefaultMaxIsolateEntries
	}
	if o.MaxCachedIsolates == 0 {
		o.MaxCachedIsolates = DefaultMaxCachedIsolates
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = DefaultOrphanGrace
	}
	if o.IsolateTTL == 0 {
		o.IsolateTTL = DefaultIsolateTTL
	}
	if o.MaxClockSkew == 0 {
		o.MaxClockSkew = DefaultMaxClockSkew
	}
	if o.CheckpointKeys == 0 {
		o.CheckpointKeys = max(o.MaxCachedKeys/2, 1)
	}
	if o.CheckpointBytes == 0 {
		o.CheckpointBytes = DefaultCheckpointBytes
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.LeaseLife == 0 {
		o.LeaseLife = DefaultLeaseLife
	}
	if o.LeaseGrace == 0 {
		o.LeaseGrace = DefaultLeaseGrace
	}
	if o.StrandBudget == 0 {
		o.StrandBudget = DefaultStrandBudget
	}
}

// Validate reports every field of o out of range (after EnsureDefaults,
// that is every negative one), joined.
func (o *MergerOptions) Validate() error {
	var errs []error
	check := func(name string, v int64) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("merge: MergerOptions.%s must be positive (0 takes the default), got %d", name, v))
		}
	}
	check("MaxCachedKeys", int64(o.MaxCachedKeys))
	check("MaxIsolatesPerKey", int64(o.MaxIsolatesPerKey))
	check("MaxIsolateEntries", int64(o.MaxIsolateEntries))
	check("MaxCachedIsolates", int64(o.MaxCachedIsolates))
	check("IsolateTTL", int64(o.IsolateTTL))
	check("CheckpointKeys", int64(o.CheckpointKeys))
	check("CheckpointBytes", o.CheckpointBytes)
	check("CheckpointInterval", int64(o.CheckpointInterval))
	for _, d := range [...]struct {
		name string
		v    time.Duration
	}{{"MaxClockSkew", o.MaxClockSkew}, {"LeaseLife", o.LeaseLife}, {"LeaseGrace", o.LeaseGrace}} {
		if err := CheckDurationOption(d.v); err != nil {
			errs = append(errs, fmt.Errorf("merge: MergerOptions.%s %w", d.name, err))
		}
	}
	if math.IsNaN(o.StrandBudget) || math.IsInf(o.StrandBudget, 0) || o.StrandBudget > 1 {
		errs = append(errs, fmt.Errorf("merge: MergerOptions.StrandBudget must be a share of the limit, at most 1 (negative: nothing ahead), got %g", o.StrandBudget))
	}
	return errors.Join(errs...)
}

// CheckDurationOption reports why d cannot be one of the bounded duration
// options (MaxClockSkew, LeaseLife, LeaseGrace): not positive,
// or longer than MaxDurationOption. The error reads after the option's
// name ("must be ...").
func CheckDurationOption(d time.Duration) error {
	if d <= 0 || d > MaxDurationOption {
		return fmt.Errorf("must be positive and at most %v (0 takes the default), got %v", MaxDurationOption, d)
	}
	return nil
}
