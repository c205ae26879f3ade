package syncloop

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Defaults of Options.
const (
	DefaultInterval      = time.Duration(wire.DefaultSyncInterval) // 100ms, the module's assumption too
	DefaultJitter        = 0.1
	DefaultBackoffMax    = 30 * time.Second
	DefaultProbeInterval = 500 * time.Millisecond
	DefaultMaxBatchBytes = 4 << 20
)

// Options configure a Scheduler (and a Loop). Zero fields take the
// documented defaults; see EnsureDefaults.
type Options struct {
	// Interval is the time between two regular syncs. Default 100ms.
	Interval time.Duration
	// Jitter spreads regular syncs uniformly over Interval*(1±Jitter), so
	// a fleet started together does not sync in lock step. A fraction in
	// [0, 1). Default 0.1; negative means no jitter.
	Jitter float64
	// MinSpacing is the least time between the starts of two syncs when
	// the module asks for early ones. Default Interval/10; negative
	// disables early syncs.
	MinSpacing time.Duration
	// BackoffBase is the wait after the first failure; each further
	// consecutive failure doubles it, up to BackoffMax (both jittered).
	// Default Interval.
	BackoffBase time.Duration
	// BackoffMax caps the backoff. Default 30s.
	BackoffMax time.Duration
	// ProbeInterval is the least time between the starts of two attempts
	// while syncs fail, when a request asks for one (Scheduler.Probe): the
	// backoff spares an idle isolate's coordinator, and a request probes it
	// past the backoff, so admissions resume within about ProbeInterval
	// (plus a round trip) of the coordinator answering again. It also bounds
	// the Retry-After of a denial on a stale view. Default 500ms; negative
	// disables probes (only the backoff retries).
	ProbeInterval time.Duration
	// StaleAfter is how long after the last successful sync the view
	// counts as stale once syncs fail (see Scheduler.Stale): the host's
	// fail policy applies from then on. An isolate merely idle (no
	// traffic, nothing to sync) is never stale. Default 3*Interval.
	StaleAfter time.Duration
	// MaxBatchBytes caps the batch Loop buffers and sends, in bytes.
	// Default 4 MiB (the coordinator's default body limit).
	MaxBatchBytes int
}

// EnsureDefaults fills the zero fields of o with the defaults.
func (o *Options) EnsureDefaults() {
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.Jitter == 0 {
		o.Jitter = DefaultJitter
	}
	if o.Jitter < 0 {
		o.Jitter = 0
	}
	if o.MinSpacing == 0 {
		o.MinSpacing = o.Interval / 10
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = o.Interval
	}
	if o.BackoffMax == 0 {
		// Never below the base: a sync interval past 30 s (an hourly
		// quota's) was refused for a backoff the user never set.
		o.BackoffMax = max(DefaultBackoffMax, o.BackoffBase)
	}
	if o.StaleAfter == 0 {
		o.StaleAfter = 3 * o.Interval
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = DefaultProbeInterval
	}
	if o.MaxBatchBytes == 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
}

// Validate reports every problem of o (after EnsureDefaults), or nil.
func (o *Options) Validate() error {
	var errs []error
	if o.Interval < time.Duration(wire.MinSyncInterval) || o.Interval > time.Duration(wire.MaxSyncInterval) {
		// (1 ns was taken: the loop spun on both cores.)
		errs = append(errs, fmt.Errorf("syncloop: the sync interval must be from %v to %v, got %v",
			time.Duration(wire.MinSyncInterval), time.Duration(wire.MaxSyncInterval), o.Interval))
	}
	if o.Jitter >= 1 {
		errs = append(errs, fmt.Errorf("syncloop: jitter must be below 1, got %v", o.Jitter))
	}
	if o.BackoffBase < 0 || o.BackoffMax < o.BackoffBase {
		errs = append(errs, fmt.Errorf("syncloop: backoff base %v must be >= 0 and <= max %v", o.BackoffBase, o.BackoffMax))
	}
	if o.StaleAfter < 0 {
		errs = append(errs, fmt.Errorf("syncloop: stale-after must be >= 0, got %v", o.StaleAfter))
	}
	if o.MaxBatchBytes < 0 {
		errs = append(errs, fmt.Errorf("syncloop: max batch bytes must be >= 0, got %d", o.MaxBatchBytes))
	}
	return errors.Join(errs...)
}

// Never is the Next of a Scheduler with a sync in flight: no timer is due
// until the attempt ends.
const Never = math.MaxInt64

// Scheduler decides when an isolate syncs. All times are nanoseconds on
// the caller's clock. It is not safe for concurrent use.
type Scheduler struct {
	opts      Options
	rng       *rand.Rand
	next      int64 // when the next sync is due
	lastStart int64 // start of the last attempt
	lastOK    int64 // end of the last successful sync (or creation)
	inflight  bool
	failures  int
	failedAt  int64 // the first failure of the current run of failures
	started   bool
}

// New returns a Scheduler created at now whose first sync is due after a
// uniformly random part of one interval (so isolates started together
// spread out). seed makes the jitter reproducible.
func New(opts Options, now int64, seed uint64) (*Scheduler, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{opts: opts, rng: rand.New(rand.NewPCG(seed, 0x5eed)), lastOK: now}
	s.next = now + 1 + s.rng.Int64N(int64(opts.Interval))
	return s, nil
}

// Options returns the scheduler's options with defaults applied.
func (s *Scheduler) Options() Options { return s.opts }

// Next returns when the next sync is due, or Never while one is in flight.
func (s *Scheduler) Next() int64 {
	if s.inflight {
		return Never
	}
	return s.next
}

// Due reports whether a sync should start at now.
func (s *Scheduler) Due(now int64) bool {
	s.settle(now)
	return !s.inflight && now >= s.next
}

// settle moves the times the scheduler holds back with a clock that
// stepped back (the host's offset to the coordinator's time moved, for
// every isolate of the host at once: clock.Offset), so that a step changes
// no wait. Left where they were, a step back of 60 s (a coordinator whose
// clock was stepped, or a failover to one whose clock disagrees) put the
// next sync 60 s off, and the isolate's counts waited as long
// (TestStepBackDelaysNoSync). A step forward needs nothing: what was due
// later is due sooner.
func (s *Scheduler) settle(now int64) {
	latest := max(s.lastStart, s.lastOK)
	if s.failures > 0 {
		latest = max(latest, s.failedAt)
	}
	if now >= latest {
		return
	}
	d := latest - now
	s.next, s.lastStart, s.lastOK, s.failedAt = s.next-d, s.lastStart-d, s.lastOK-d, s.failedAt-d
}

// InFlight reports whether an attempt has begun and not ended.
func (s *Scheduler) InFlight() bool { return s.inflight }

// Failures returns the number of consecutive failed attempts.
func (s *Scheduler) Failures() int { return s.failures }

// LastSuccess returns the time of the last successful sync (the creation
// time before the first).
func (s *Scheduler) LastSuccess() int64 { return s.lastOK }

// Stale reports whether the view is stale at now: the last successful
// sync is older than Options.StaleAfter and syncs fail (the last attempt
// failed, or the one in flight began more than SlowAttempt ago, or
// StaleAfter if longer). The
// host's fail policy applies then. An isolate that was merely idle is not
// stale: its next sync refreshes it (see IsStale).
func (s *Scheduler) Stale(now int64) bool {
	s.settle(now)
	started := int64(0)
	if s.inflight {
		started = s.lastStart
	}
	return IsStale(now, s.lastOK, started, s.failures, int64(s.opts.StaleAfter))
}

// IsStale is the definition of a stale view shared by Scheduler.Stale and
// the edge host (which tracks the same times atomically): at now (ns) the
// last successful sync (lastOK) is older than after (ns) and either the
// last attempt failed (failures > 0) or the attempt in flight, started at
// inflightSince (0: none in flight), began more than SlowAttempt (or
// after, if longer) ago.
func IsStale(now, lastOK, inflightSince int64, failures int, after int64) bool {
	if now-lastOK <= after {
		return false
	}
	return failures > 0 || (inflightSince != 0 && now-inflightSince > max(after, int64(SlowAttempt)))
}

// SlowAttempt is how long an attempt may be in flight before the syncs
// count as failing (IsStale), when Options.StaleAfter is shorter: 1 s. A
// coordinator that answers slowly keeps the view fresh, and strict and
// auto limiters wait for its leases; a stale view hands the decisions to
// the fail policies, and `open` admits alone. Counted from StaleAfter (300
// ms by default), replies 400-700 ms away put strict keys of 10/s at 12-40
// a window under the default policy, every sync succeeding.
const SlowAttempt = time.Second

// Probe records that a request found the isolate's syncs failing at now
// and reports whether an attempt should start now, past the backoff: no
// attempt is in flight and the last one began at least
// Options.ProbeInterval ago. It is false while syncs succeed (Want and the
// interval apply then) and when probes are disabled.
func (s *Scheduler) Probe(now int64) bool {
	s.settle(now)
	if s.opts.ProbeInterval < 0 || s.inflight || s.failures == 0 {
		return false
	}
	return now-s.lastStart >= int64(s.opts.ProbeInterval)
}

// Want records that the module asked for an early sync at now. It returns
// true when the sync should start now; otherwise the next sync is moved
// forward to the earliest time the minimum spacing allows (Next tells
// when). Early syncs are not taken while an attempt is in flight or while
// backing off after a failure.
func (s *Scheduler) Want(now int64) bool {
	s.settle(now)
	if s.opts.MinSpacing < 0 || s.inflight || s.failures > 0 {
		return false
	}
	at := now
	if s.started {
		at = max(now, s.lastStart+int64(s.opts.MinSpacing))
	}
	if at <= now {
		return true
	}
	s.next = min(s.next, at)
	return false
}

// Begin records that an attempt started at now (the batch was handed to
// the transport).
func (s *Scheduler) Begin(now int64) {
	s.settle(now)
	s.inflight, s.started, s.lastStart = true, true, now
}

// Success records that the attempt's reply was applied at now; the next
// regular sync is one jittered interval later.
func (s *Scheduler) Success(now int64) {
	s.settle(now)
	s.inflight, s.failures, s.lastOK = false, 0, now
	s.next = now + s.jitter(int64(s.opts.Interval))
}

// Idle records that at now there was nothing to sync; the next check is
// one jittered interval later.
func (s *Scheduler) Idle(now int64) {
	s.settle(now)
	s.inflight = false
	if s.failures == 0 {
		s.lastOK = now // nothing unsynced: the view is as fresh as it needs to be
	}
	s.next = now + s.jitter(int64(s.opts.Interval))
}

// Failure records that the attempt failed at now (transport error,
// timeout, coordinator unavailable); the next attempt waits BackoffBase *
// 2^(failures-1), capped at BackoffMax and at how long the syncs have
// been failing (at least BackoffBase), jittered. The second cap keeps the
// wait in step with the outage, however many attempts it saw: the probes
// of requests (Probe) during a few seconds' outage made 31 failures, a
// wait of BackoffMax (30 s) after the coordinator came back, and an edge
// without traffic then (an orchestrator drains edges whose health check
// fails) stayed stale as long, its counts unsent.
func (s *Scheduler) Failure(now int64) {
	s.settle(now)
	s.inflight = false
	if s.failures == 0 {
		s.failedAt = now
	}
	s.failures++
	d := int64(s.opts.BackoffBase)
	for i := 1; i < s.failures && d < int64(s.opts.BackoffMax); i++ {
		d *= 2
	}
	d = min(d, int64(s.opts.BackoffMax), max(int64(s.opts.BackoffBase), now-s.failedAt))
	s.next = now + max(s.jitter(d), 1)
}

// Reset forgets the history, as for a new isolate created at now.
func (s *Scheduler) Reset(now int64) {
	s.inflight, s.failures, s.started, s.lastOK = false, 0, false, now
	s.next = now + 1 + s.rng.Int64N(int64(s.opts.Interval))
}

func (s *Scheduler) jitter(d int64) int64 {
	if s.opts.Jitter <= 0 || d <= 0 {
		return d
	}
	span := int64(float64(d) * s.opts.Jitter)
	if span <= 0 {
		return d
	}
	return d - span + s.rng.Int64N(2*span+1)
}
