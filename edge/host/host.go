// Package host is the edge host: it runs isolates of the edge module under
// wazero (edge/isolate), sends each request to one of them (isolates share
// no memory, as in an edge runtime), runs one sync loop per isolate with the
// coordinator (edge/syncloop over HTTP), and serves an HTTP API that answers
// with Retry-After and the IETF RateLimit / RateLimit-Policy fields
// (draft-ietf-httpapi-ratelimit-headers-10).
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/edge/failpolicy"
	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Options configure a Host. Zero fields take the documented defaults.
type Options struct {
	// Config holds the limiters; IsolateID is ignored (each isolate gets
	// IDPrefix-N).
	Config wire.Config
	// Isolates is the number of isolates, at most MaxIsolates (256).
	// Default DefaultIsolates (4) when <= 0.
	Isolates int
	// Coordinator is the coordinator's base URL ("http://127.0.0.1:7070"),
	// or several comma-separated URLs of coordinators sharing one store
	// (Redis Cluster), failed over between (syncloop.HTTPTransport): each
	// isolate prefers the one its id hashes to (syncloop.Preferred).
	// Empty runs without syncing: every isolate decides alone.
	Coordinator string
	// Token is the bearer token for the coordinator.
	Token string
	// Sync configures the sync loops (interval default 100ms). Its
	// StaleAfter (default 3 intervals) is how long after its last good
	// sync an isolate whose syncs fail counts as stale: the fail policy
	// applies and /healthz answers 503 (an idle isolate is never stale).
	// Its ProbeInterval (default 500ms) is how often requests on a stale
	// isolate probe the coordinator past the backoff, and the most a
	// stale denial's Retry-After says.
	Sync syncloop.Options
	// SyncTimeout bounds one sync round trip with the coordinator.
	// Default 5s (syncloop.DefaultHTTPTimeout).
	SyncTimeout time.Duration
	// RetryWait is how long a request the module answered with SyncRetry
	// (strict lease miss, read-through cold key) waits for the next sync
	// before it is decided again. Default 1s; negative denies at once. A
	// request on a stale isolate does not wait (its loop is backing off).
	RetryWait time.Duration
	// Heartbeat is the longest an isolate goes without a sync: with
	// nothing to report for that long it sends an empty batch, so the
	// coordinator's dashboard tells an idle host from a dead one
	// (wire.Config.Heartbeat). Default DefaultHeartbeat (10 s); negative:
	// none.
	Heartbeat time.Duration
	// FailPolicy is the fail policy of limiters whose config names none
	// (wire.LimiterConfig.FailPolicy). Default failpolicy.Open.
	FailPolicy failpolicy.Policy
	// ShareIsolates is the number of isolates across the fleet that share
	// the limits: local-share admits limit/ShareIsolates per window per key
	// on each isolate. Default Isolates (this host alone).
	ShareIsolates int
	// IDPrefix names the isolates in sync batches. Default
	// "edge-<hostname>-<pid>-<start time>", unique per process.
	IDPrefix string
	// Server bounds the HTTP connections of Serve and Server.
	Server ServerOptions
	// Runtime configures the wazero runtime (module, memory cap per isolate).
	Runtime isolate.Options
	// Clock is the host's own time. Default clock.Real; with a
	// coordinator (and not OwnClock) clock.NewSteady(): the wall time at
	// start plus the monotonic time since, which an operating system clock
	// set back does not move (set forward, it catches up). With a
	// coordinator, the host runs on the coordinator's time (decisions,
	// headers, batch times, lease lives, staleness): Clock plus the offset
	// learned from the coordinator's replies (clock.Offset, clock.Header),
	// moved when the two differ by more than 50 ms plus half a round trip,
	// unless OwnClock is set.
	Clock clock.Clock
	// OwnClock keeps the host on Clock even with a coordinator: a host
	// whose clock is off then has its batches refused (ahead by more than
	// the coordinator's allowed skew) or waits for leases of windows it
	// does not reach (behind). For tests of the coordinator's own
	// defences. Default false.
	OwnClock bool
	// Logger receives the host's events: a sync loop that starts failing
	// (warn, once per outage) and recovers (info), an isolate restarted
	// after a trap (error), a reincarnation (warn). Default slog.Default().
	Logger *slog.Logger

	// driven (the package's tests): isolates configured as synced ones
	// (not Alone) with neither a transport nor a loop; the test sets a
	// slot's transport and drives its syncs.
	driven bool
}

// DefaultIsolates is the default number of isolates.
const DefaultIsolates = 4

// MaxIsolates is the most isolates one host runs: 256. Each is a module
// instance with its own memory (up to isolate.DefaultMemoryLimitPages)
// and sync loop; more belong on more hosts. Before the bound, --isolates
// 100000000 built isolates until memory ran out (3.7 GB at 25,000, deaf
// to SIGTERM).
const MaxIsolates = 256

// DefaultRetryWait is the default wait of a SyncRetry request.
const DefaultRetryWait = time.Second

// DefaultHeartbeat is the default of Options.Heartbeat: 10 s.
const DefaultHeartbeat = 10 * time.Second

// Host runs the isolates and their sync loops. It is safe for concurrent
// use: each isolate is used by one goroutine at a time.
type Host struct {
	opts     Options
	rt       *isolate.Runtime
	slots    []*slot
	policies []failpolicy.Policy // per limiter
	next     atomic.Uint64
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	errs     atomic.Int64
	met      *metrics
	probe    *syncloop.HTTPTransport // probes a coordinator for /healthz (CheckHealth); the isolates sync through their own
	probeMu  sync.Mutex              // one probe at a time
	probedAt atomic.Int64            // ns of the last successful probe; 0 before
	foreign  atomic.Bool             // the log said the coordinator's limits differ (foreign.go)
	toldMu   sync.Mutex
	told     map[string]bool              // limiter lists the log said the coordinator does not count (uncounted); under toldMu
	probeErr atomic.Pointer[probeFailure] // the last failed probe (CheckHealth)
	stop     *stopper                     // the HTTP server's graceful stop (stop.go)
	offset   *clock.Offset                // the coordinator's time (Options.Clock wrapped); nil alone or with OwnClock
}

// slot is one isolate with its lock, its sync loop, a broadcast of
// completed syncs and what /healthz and the fail policy need to know of
// its syncs.
type slot struct {
	idx     int
	log     *slog.Logger // the host's, with the isolate's id
	foreign *atomic.Bool // the host's foreign: said once (foreign.go)
	clk     clock.Clock  // the host's
	mu      sync.Mutex
	iso     *isolate.Isolate
	share   *failpolicy.Share[shareKey] // local-share counts; under mu
	loop    *syncloop.Loop
	tr      *syncloop.HTTPTransport // the loop's; nil without a coordinator
	syncMu  sync.Mutex
	synced  chan struct{} // closed and replaced after every attempt that ends (applied or failed)

	lastOK    atomic.Int64 // ns of the last good sync (or of nothing to sync, or creation)
	lastReply atomic.Int64 // ns of the last applied reply on the host's own clock (baseTime); 0 before the first
	attemptAt atomic.Int64 // ns the attempt in flight began; 0 when none is
	lastStart atomic.Int64 // ns the last attempt began
	lastEnd   atomic.Int64 // ns the last attempt failed (or was abandoned)
	reading   atomic.Int64 // ns the attempt in flight began reading the coordinator's time (timeread.go); 0 when none is
	// refreshUntil: until when requests on a stale view wait for the
	// probe one of them asked for after a quiet spell (refresh), ns.
	refreshUntil atomic.Int64
	answered     atomic.Bool  // the attempt in flight was answered by an amendment's reply (applyReply)
	cuts         atomic.Int64 // batches cut (a resend after an attempt without a reply is not one)
	// unanswered: the module's last batch was sent and no reply to it
	// applied (lockedModule.SyncOut, applyReply); under mu.
	unanswered bool
	replies    atomic.Int64 // applied replies
	failures   atomic.Int64 // consecutive failed sync attempts
	unacked    atomic.Int64 // cost in the batch sent and not yet acknowledged

	// Amendments (amend.go).
	ctx     context.Context // the host's: amendments end with it
	amendMu sync.Mutex
	amends  []amendment // on their way; under amendMu
	amendID uint64      // the last amendment's id; under amendMu
	tally   skewTally   // the amendments of the last cut amended; under amendMu
	inc     uint64      // incarnations since the start (lockedModule.Reincarnate); under amendMu and mu
	// amendEnd is closed and replaced (made on demand) when an amendment
	// ends; under amendMu.
	amendEnd chan struct{}
	amendWG  sync.WaitGroup
	batches  atomic.Int64 // batches answered (first replies): a second reply of a batch is not another reply for a held request
}

// shareKey identifies a key of a limiter in a local share.
type shareKey struct {
	lim int
	key string
}

// New starts a host: it compiles the module, starts the isolates and, when
// a coordinator is set, their sync loops (stopped by Close).
func New(ctx context.Context, opts Options) (*Host, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real
		if opts.Coordinator != "" && !opts.OwnClock {
			// Under the coordinator's offset, which takes up its drift:
			// an OS clock set back does not move the isolates' time.
			opts.Clock = clock.NewSteady()
		}
	}
	if opts.Isolates <= 0 {
		opts.Isolates = DefaultIsolates
	}
	if opts.Isolates > MaxIsolates {
		return nil, fmt.Errorf("host: Options.Isolates is %d, more than MaxIsolates (%d)", opts.Isolates, MaxIsolates)
	}
	if opts.ShareIsolates <= 0 {
		opts.ShareIsolates = opts.Isolates
	}
	if opts.RetryWait == 0 {
		opts.RetryWait = DefaultRetryWait
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = syncloop.DefaultHTTPTimeout
	}
	if opts.IDPrefix == "" {
		name, _ := os.Hostname()
		opts.IDPrefix = fmt.Sprintf("edge-%s-%d-%d", name, os.Getpid(), opts.Clock.Now())
	}
	if opts.Config.Version == 0 {
		opts.Config.Version = wire.Version
	}
	if opts.Token != "" {
		if err := wire.CheckToken(opts.Token); err != nil {
			return nil, fmt.Errorf("host: Options.Token: %w", err)
		}
	}
	if opts.Coordinator == "" && !opts.driven {
		// Isolates that never sync: auto limiters decide alone.
		alone, err := opts.Config.Alone()
		if err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
		opts.Config = alone
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Sync.EnsureDefaults()
	if err := opts.Sync.Validate(); err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	opts.Server.ensureDefaults()
	if w := opts.Server.WriteTimeout; w > 0 && opts.RetryWait > 0 && w <= opts.RetryWait {
		return nil, fmt.Errorf("host: the write timeout %v must exceed the retry wait %v", w, opts.RetryWait)
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, fmt.Errorf("host: config: %w", err)
	}
	rt, err := isolate.NewRuntime(ctx, opts.Runtime)
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	var offset *clock.Offset
	if opts.Coordinator != "" && !opts.OwnClock {
		offset = &clock.Offset{Base: opts.Clock}
		opts.Clock = offset
	}
	lctx, cancel := context.WithCancel(context.Background())
	h := &Host{opts: opts, rt: rt, cancel: cancel, offset: offset, stop: newStopper()}
	for i := range opts.Config.Limiters {
		h.policies = append(h.policies, failpolicy.For(&opts.Config.Limiters[i], opts.FailPolicy))
	}
	h.met = newMetrics(h)
	client := &http.Client{Timeout: opts.SyncTimeout, CheckRedirect: syncloop.NoRedirect}
	h.probe = &syncloop.HTTPTransport{URL: opts.Coordinator, ID: opts.IDPrefix, Token: opts.Token, Client: client, Time: offset}
	if offset != nil {
		// The coordinator's time before the isolates' first decision, so
		// that none decides or cuts a batch on a clock that is off (a
		// coordinator not up yet is read at the first sync).
		pctx, pcancel := context.WithTimeout(ctx, min(opts.SyncTimeout, time.Second))
		h.probe.Probe(pctx)
		pcancel()
	}
	start := opts.Clock.Now()
	for i := 0; i < opts.Isolates; i++ {
		if err := ctx.Err(); err != nil { // stopped while starting
			h.Close()
			return nil, fmt.Errorf("host: %w", err)
		}
		cfg := opts.Config
		cfg.IsolateID = opts.IDPrefix + "-" + strconv.Itoa(i)
		if opts.Sync.Interval > 0 {
			cfg.SyncInterval = min(max(int64(opts.Sync.Interval), wire.MinSyncInterval), wire.MaxSyncInterval)
		}
		if opts.Heartbeat > 0 {
			cfg.Heartbeat = min(max(int64(opts.Heartbeat), wire.MinSyncInterval), wire.MaxSyncInterval)
		}
		iso, err := rt.NewIsolate(ctx, cfg, uint64(i))
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("host: %w", err)
		}
		if offset != nil {
			iso.FollowOffset(offset.Offset) // a step back ends leases on time (core.Core.ClockOffset)
		}
		s := &slot{idx: i, iso: iso, synced: make(chan struct{}), share: failpolicy.NewShare[shareKey](int(opts.Config.MaxKeys)), foreign: &h.foreign}
		s.lastOK.Store(start)
		s.log, s.clk, s.ctx = opts.Logger.With("isolate", cfg.IsolateID), opts.Clock, lctx
		h.slots = append(h.slots, s)
		if opts.Coordinator == "" {
			continue
		}
		// Each isolate has its own transport: its id picks its preferred
		// coordinator, so the host's isolates spread over the list.
		s.tr = &syncloop.HTTPTransport{URL: opts.Coordinator, ID: cfg.IsolateID, Token: opts.Token, Client: client, Time: offset,
			Uncounted: h.uncounted}
		tr := readMark{timedTransport{tr: s.tr, m: h.met}, s}
		if s.loop, err = syncloop.NewLoop(opts.Sync, opts.Clock, tr, lockedModule{s}, uint64(i)); err != nil {
			h.Close()
			return nil, fmt.Errorf("host: %w", err)
		}
		s.loop.OnError = func(err error) {
			h.errs.Add(1)
			s.attemptFailed(err)
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			s.loop.Run(lctx)
		}()
	}
	return h, nil
}

// Close stops the sync loops, gives the isolates' leases back to the
// coordinator (release.go: a graceful stop reports what every isolate
// admitted and returns the rest; bounded by SyncTimeout) and releases the
// isolates.
func (h *Host) Close() error {
	h.cancel()
	h.wg.Wait()
	for _, s := range h.slots {
		s.stopAmends()
	}
	h.release()
	return h.rt.Close(context.Background())
}

// SyncErrors returns how many sync attempts failed since the start.
func (h *Host) SyncErrors() int64 { return h.errs.Load() }

// StaleAfter returns the stale bound (Options.Sync.StaleAfter, defaults applied).
func (h *Host) StaleAfter() time.Duration { return h.opts.Sync.StaleAfter }

// Config returns the limiters the host runs.
func (h *Host) Config() wire.Config { return h.opts.Config }

// Decision is the outcome of Host.Decide.
type Decision struct {
	isolate.Decision
	// Stale reports that the isolate's view was stale: the limiters' fail
	// policies applied (Policy is the binding limiter's).
	Stale  bool
	Policy failpolicy.Policy
}

// Decide decides checks (all or nothing) at now (ns) on the next isolate.
// When that isolate's view is stale (its syncs fail and its last good one
// is older than Sync.StaleAfter; see syncloop.IsStale), each limiter's
// fail policy decides (decideStale). A SyncRetry answer on a fresh isolate
// (a lease to renew after an idle spell, a read-through cold key) waits
// for its next sync (at most Options.RetryWait) and is decided once more;
// if that sync fails, the fail policy decides it at once (the syncs fail:
// the request is decided as on a stale view).
func (h *Host) Decide(ctx context.Context, checks []isolate.Check, now func() int64) (Decision, error) {
	s := h.slots[h.next.Add(1)%uint64(len(h.slots))]
	t := now()
	after := int64(h.opts.Sync.StaleAfter)
	if s.stale(t, after) && h.refresh(ctx, s, t) {
		t = now()
	}
	if !s.stale(t, after) {
		d, wait, held, err := s.decide(ctx, checks, t, false)
		if err == nil && d.SyncRetry && s.loop != nil {
			d, err = s.retry(ctx, checks, d, wait, held, syncloop.RetryPolicy{MaxWait: h.opts.RetryWait}, t, now)
		}
		if err != nil {
			return Decision{}, err
		}
		if t = now(); !d.SyncRetry || (s.failures.Load() == 0 && !s.stale(t, after)) {
			if d.SyncRetry {
				d = h.capRetry(d)
			}
			out := Decision{Decision: d, Policy: h.policies[d.Limiter]}
			h.met.decided(h, out)
			return out, nil
		}
	}
	out, err := h.decideStale(ctx, s, checks, t)
	if err != nil {
		return out, err
	}
	h.met.decided(h, out)
	return out, nil
}

// retry holds a SyncRetry decision d (made at t) for the slot's syncs
// within policy p (see syncloop.RetryPolicy, which the simulator runs too):
// it is decided again after each applied reply while it still answers
// SyncRetry and may wait; at the deadline it stands denied. While held, an
// attempt in flight asks for it (ask). wait is closed when the next
// attempt ends; a failed attempt ends the wait too (the caller applies the
// fail policy).
func (s *slot) retry(ctx context.Context, checks []isolate.Check, d isolate.Decision, wait <-chan struct{}, held int64, p syncloop.RetryPolicy, t int64, now func() int64) (isolate.Decision, error) {
	r, ok := p.Begin(t)
	if !ok {
		s.want()
		return d, nil
	}
	r.Decided(d.Reset, t)
	mine := s.ask(t, held, 0) // the amendment that asks for it, if any
	expired := s.clk.After(r.Deadline() - t)
	replies, batches := s.replies.Load(), s.batches.Load()
	for {
		select {
		case <-wait:
		case <-expired:
			return d, nil
		case <-ctx.Done():
			return d, ctx.Err()
		}
		if s.replies.Load() == replies && s.failures.Load() > 0 {
			return d, nil // the attempt failed
		}
		// A second reply of the same batch (its amendment's, amend.go)
		// answers the same demand: it is not another reply.
		if second := s.batches.Load() == batches; second && now() > r.Deadline() || !second && !r.Replied(now()) {
			return d, nil
		}
		var err error
		replies, batches = s.replies.Load(), s.batches.Load()
		at := now()
		r.NewWindow(at)
		// Its last decision: answered SyncRetry again, it stands denied,
		// and its ask is withdrawn (core.Core.Withdraw).
		if d, wait, _, err = s.decide(ctx, checks, at, !r.Again()); err != nil || !d.SyncRetry || !r.Again() {
			return d, err
		}
		r.Decided(d.Reset, at)
		mine = s.ask(at, held, mine)
	}
}

// decide runs one decision on the slot's isolate and kicks its loop when
// the module asks for a sync (for a request it answers SyncRetry, retry
// asks). It returns the channel closed by the next applied reply, and
// the count of batches cut before the decision (slot.cuts, read under the
// module's lock): a batch cut after it asks for a request it held. final:
// the request is not held again, so a SyncRetry answer withdraws its ask.
func (s *slot) decide(ctx context.Context, checks []isolate.Check, now int64, final bool) (isolate.Decision, <-chan struct{}, int64, error) {
	s.syncMu.Lock()
	wait := s.synced
	s.syncMu.Unlock()
	s.mu.Lock()
	var d isolate.Decision
	var err error
	if len(checks) == 1 {
		d, err = s.iso.Decide(ctx, checks[0].Limiter, checks[0].Key, checks[0].Cost, now)
	} else {
		d, err = s.iso.DecideMulti(ctx, checks, now)
	}
	if final && err == nil && d.SyncRetry {
		err = s.iso.Withdraw(ctx)
	}
	held := s.cuts.Load()
	s.mu.Unlock()
	if err != nil {
		if errors.Is(err, isolate.ErrTrap) {
			s.log.Error("host: the isolate trapped and restarted; what it had not synced is lost", "err", err)
		}
		return d, nil, 0, fmt.Errorf("host: %w", err)
	}
	if s.loop != nil && d.SyncWanted && !d.SyncRetry {
		s.want() // a held request asks in retry (ask)
	}
	return d, wait, held, nil
}

// lockedModule gives the sync loop serialized access to the isolate and
// announces every applied reply.
type lockedModule struct{ s *slot }

// SyncOut cuts (or re-sends) the isolate's batch. Nothing to sync counts
// as a good sync unless attempts are failing (as syncloop.Scheduler.Idle).
func (m lockedModule) SyncOut(ctx context.Context, now int64, dst []byte) ([]byte, error) {
	m.s.answered.Store(false) // a new attempt
	m.s.mu.Lock()
	b, err := m.s.iso.SyncOut(ctx, now, dst)
	if err == nil && len(b) > len(dst) {
		// A batch no reply was applied to (its attempt failed) stays the
		// module's outstanding one, and this sends it again: it asks for
		// nothing new (a request held since it was cut still needs an
		// ask), so it is no new cut.
		if !m.s.unanswered {
			m.s.cuts.Add(1) // under the lock: a decision after it sees it (slot.decide)
		}
		m.s.unanswered = true
		// Under the lock too: an amendment's reply applied after it
		// ends this attempt (applyReply).
		m.s.attemptAt.Store(max(now, 1))
		m.s.lastStart.Store(now)
		m.s.unacked.Store(batchCost(b[len(dst):]))
	}
	m.s.mu.Unlock()
	if err == nil && len(b) == len(dst) {
		if m.s.failures.Load() == 0 {
			m.s.lastOK.Store(now)
		}
		if m.s.attemptAt.Swap(0) != 0 {
			m.s.ended() // a recall left nothing to send: no attempt is on its way
		}
	}
	return b, err
}

// Recall takes the isolate's outstanding batch back (syncloop.Recaller):
// the coordinator refused it for its times and applied nothing, and the
// batch cut again at the host's time is a new cut (it carries the asks of
// the requests held since the refused one was cut). An amended batch is
// taken back when every amendment of it was refused for its times too: it
// waits for those on their way first (sent after the batch, their answers
// come just after its refusal).
func (m lockedModule) Recall(ctx context.Context, now int64) (bool, error) {
	cut := m.s.cuts.Load()
	m.s.waitAmends(ctx, cut)
	// Both locks, in slot.amend's order (amendMu, then mu), held until the
	// module has taken the batch back: no amendment of it is sent between
	// the check and the recall.
	m.s.amendMu.Lock()
	defer m.s.amendMu.Unlock()
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	settled, refused := m.s.amendsSettled(cut)
	ok, err := m.s.iso.RecallAmended(ctx, now, settled && refused)
	if ok {
		m.s.unanswered = false
		m.s.log.Warn("host: the coordinator refused the isolate's batch for its times; cutting it again at the coordinator's time")
	}
	return ok, err
}

// Answered reports whether the batch of the attempt in flight was answered
// by an amendment's reply (syncloop.Answerer): its attempt's failure is no
// failed sync.
func (m lockedModule) Answered() bool { return m.s.answered.Load() }

// Reincarnate gives the isolate a new incarnation (syncloop.Reincarnator):
// the coordinator refused the batch's sequence number (it lost the
// isolate's state, or another client used its id), so the isolate takes a
// new id and resends its outstanding deltas as batch 1.
//
// The amendments of the old incarnation are void: no longer on their way
// for the new one (none is waited for, none counts against MaxAmends),
// and neither their replies (applyReply) nor their refusals (amendDone)
// count. Refused for their sequence number as the batch was, they say
// nothing of the new incarnation's batch 1 (the same cut), whose tally
// starts afresh.
func (m lockedModule) Reincarnate(ctx context.Context) error {
	m.s.amendMu.Lock() // slot.amend's order: amendMu, then mu
	defer m.s.amendMu.Unlock()
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	old := m.s.iso.ID()
	err := m.s.iso.Reincarnate(ctx)
	if err == nil {
		m.s.inc++
		m.s.amends = m.s.amends[:0] // all of the old incarnation: amendMu is held
		m.s.tally = skewTally{cut: m.s.cuts.Load()}
		m.s.log.Warn("host: the coordinator refused the isolate's sequence number; resending its deltas under a new id", "old_id", old, "new_id", m.s.iso.ID())
	}
	return err
}

// SyncIn applies a reply: a good sync. The batch's own reply after its
// amendment's (amend.go) is good too, taken or refused as stale.
func (m lockedModule) SyncIn(ctx context.Context, reply []byte, now int64) error {
	first, err := m.s.applyReply(ctx, reply, now, 0, 0)
	if err != nil && !first {
		return nil // the batch was answered already
	}
	return err
}

// attemptFailed ends the slot's attempt that failed with err (the loop's
// OnError). One whose batch an amendment's reply answered first (answered)
// is no failed sync: the isolate's view is fresh, and the fail policies
// stay off.
func (s *slot) attemptFailed(err error) {
	s.attemptAt.Store(0)
	s.lastEnd.Store(s.clk.Now())
	if !s.answered.Swap(false) && s.failures.Add(1) == 1 {
		s.log.Warn("host: sync failing; the fail policies decide once the view is stale, until a sync succeeds", "err", err)
	}
	s.ended()
}

// ended wakes the requests waiting for the end of the slot's attempt.
func (s *slot) ended() {
	s.syncMu.Lock()
	close(s.synced)
	s.synced = make(chan struct{})
	s.syncMu.Unlock()
}

// ErrBadRequest marks a request the host refuses (see the HTTP handler).
var ErrBadRequest = errors.New("host: bad request")

// baseTime returns now (ns, on the host's clock: the coordinator's time
// when the host follows it) on the host's own clock, which does not step
// when the offset to the coordinator's moves: an age measured there stays
// true across a step (a reply read with the offset a minute ahead showed
// as -57 s old once the offset stepped back).
func (s *slot) baseTime(now int64) int64 {
	if o, ok := s.clk.(*clock.Offset); ok {
		return now - o.Offset()
	}
	return now
}
