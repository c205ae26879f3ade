package coordinator

import (
	"context"
	"errors"
	"fmt"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/edgelimit/edgelimit/clock"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/dashboard"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Errors returned by a Coordinator. Both map to HTTP 503.
var (
	// ErrUnavailable wraps a Store commit failure (full disk, I/O error):
	// the batch was not applied and may be retried with the same Seq. It is
	// merge.ErrUnavailable.
	ErrUnavailable = merge.ErrUnavailable
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("coordinator: closed")
)

// Options configure Open. Zero fields take the documented defaults.
type Options struct {
	// Dir is the Pebble data directory, created if missing. Required unless
	// InMemory is set or Store is given.
	Dir string
	// InMemory runs Pebble on vfs.NewMem(): nothing survives Close. For
	// demos, tests and the simulator.
	InMemory bool
	// DiskReserve is the free space, bytes, that the store's writes leave
	// on the file system of Dir: below it the coordinator answers syncs
	// 503 and GET /healthz 503, and Open refuses to open
	// (pebblestore.Options.DiskReserve). Default
	// pebblestore.DefaultDiskReserve (64 MiB); negative: no reserve.
	DiskReserve int64
	// Store, when set, is used instead of opening Pebble (Dir and InMemory
	// are ignored). Close closes it. A SharedStore (redisstore.Store) runs the
	// coordinator in shared mode (shared.go): stateless, so several
	// coordinators may serve the same isolates and keys; GC is then left
	// to the store's TTLs.
	Store merge.Store
	// Config holds the limiters (the same configuration as the isolates');
	// it must be valid (wire.Config.Validate).
	Config wire.Config
	// Clock is the coordinator's time (package clock). Default clock.Real.
	Clock clock.Clock
	// Tokens are the bearer tokens accepted on /v1/* with every role (any
	// one of them, so each edge may have its own; roles.go). Empty, with
	// no Grants, means no authentication.
	Tokens []string
	// Grants are bearer tokens with some roles only (edge, read, admin;
	// roles.go). Empty: every token of Tokens may do everything, the
	// single trusted fleet of a coordinator without roles.
	Grants []Grant
	// AllowedHosts are the host names (no port; hostcheck.Any for all)
	// a server bound to loopback answers besides the loopback ones
	// (localhost, *.localhost, 127.0.0.0/8, ::1): Serve refuses other
	// Host headers 403, against DNS rebinding (hostguard.go). Default
	// none. A server on another address answers any Host.
	AllowedHosts []string
	// MaxBodyBytes caps a request body, in bytes. Default 4 MiB (4194304),
	// which holds a batch of MaxBatchEntries entries with long keys.
	MaxBodyBytes int64
	// MaxGroup is the most requests merged into one group commit.
	// Default DefaultMaxGroup (1024).
	MaxGroup int
	// GCInterval is the time between two GC steps while there is nothing
	// to collect, and the longest between two steps while GC finds
	// garbage (unless a step took over a third of it: see GCPass). Default
	// DefaultGCInterval (2 s); negative disables GC.
	GCInterval time.Duration
	// GCBudget is the most stored records one GC step visits. With
	// GCInterval it sets the pace of a store with nothing to collect:
	// GCBudget records every GCInterval (10,000 records a second by
	// default). Default DefaultGCBudget (20000).
	GCBudget int
	// GCPass is the time a full GC pass over the stored records aims at
	// while GC finds garbage (the pass in progress, or the last one,
	// deleted at least 1% of the records it visited): the steps then come
	// as often as visiting the records the last pass counted within
	// GCPass takes, and at least GCBudget records every GCInterval, so the
	// expired records of a key flood wait about GCPass however many
	// records the store holds. Such a step visits what fits in about 5 ms
	// at the previous step's cost per record (at least 1000 records, at
	// most GCBudget), and the next one waits at least three times as long
	// as it held the committer: GC takes at most a quarter of the
	// committer's time (the first pass after Open, before the records are
	// counted, goes as fast as that allows). Default DefaultGCPass (30 s);
	// negative: the steps keep the GCInterval pace whatever they find.
	GCPass time.Duration
	// Merger bounds the in-memory state; see MergerOptions. Its zero
	// cache bounds are sized from MaxMemory.
	Merger merge.MergerOptions
	// MaxMemory is the memory the coordinator is sized for, bytes (at least
	// MinMaxMemory): it sets the cache bounds of Merger left zero and
	// Pebble's block cache (BudgetFor, memory.go). The process's Go memory
	// limit is its owner's: `edgelimit coordinator --max-memory` sets it to
	// BudgetFor(MaxMemory).GoLimit. With InMemory the whole store is in
	// memory too, unbounded. Default DefaultMaxMemory (768 MiB).
	MaxMemory int64
	// HistoryKeys is how many keys per limiter the usage history keeps
	// (their per-minute history and last view: historyrun.go, package
	// history). Default history.DefaultKeysPerLimiter (1000); negative:
	// the limiters' totals only.
	HistoryKeys int
	// TokenKeysPerHour is the most distinct keys one token's batches may
	// name in an hour; past it the token's batches are refused 429 until
	// the hour ends (quota.go). Default DefaultTokenKeysPerHour
	// (1,000,000); negative: no quota. Only with tokens.
	TokenKeysPerHour int
	// TokenIsolatesPerHour is the most distinct isolate ids one token's
	// batches may name in an hour (quota.go). Default
	// DefaultTokenIsolatesPerHour (100,000); negative: no quota. Only
	// with tokens.
	TokenIsolatesPerHour int
	// TokenMarksPerHour is, over Redis, the most distinct (isolate,
	// bucket) pairs one token's batches may name in an hour: each is a
	// sequence mark in the store (quota.go). Default
	// DefaultTokenMarksPerHour (1,000,000); negative: no quota. Only
	// with Tokens, and only in the shared mode.
	TokenMarksPerHour int
	// Logger receives the coordinator's log lines: the audit lines of the
	// live control (control.go). Default slog.Default().
	Logger *slog.Logger
}

// DefaultMaxBodyBytes is the default cap on a request body: 4 MiB.
const DefaultMaxBodyBytes = 4 << 20

// Defaults of Options.
const (
	// DefaultMaxGroup is Options.MaxGroup's default: 1024 requests.
	DefaultMaxGroup = 1024
	// DefaultGCInterval is Options.GCInterval's default: 2 s.
	DefaultGCInterval = 2 * time.Second
	// DefaultGCBudget is Options.GCBudget's default: 20000 records.
	DefaultGCBudget = 20000
	// DefaultGCPass is Options.GCPass's default: 30 s.
	DefaultGCPass = 30 * time.Second
)

// EnsureDefaults sets every zero field of o (and of o.Merger) to its
// default.
func (o *Options) EnsureDefaults() {
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxGroup == 0 {
		o.MaxGroup = DefaultMaxGroup
	}
	if o.GCInterval == 0 {
		o.GCInterval = DefaultGCInterval
	}
	if o.GCBudget == 0 {
		o.GCBudget = DefaultGCBudget
	}
	if o.GCPass == 0 {
		o.GCPass = DefaultGCPass
	}
	if o.TokenKeysPerHour == 0 {
		o.TokenKeysPerHour = DefaultTokenKeysPerHour
	}
	if o.TokenIsolatesPerHour == 0 {
		o.TokenIsolatesPerHour = DefaultTokenIsolatesPerHour
	}
	if o.TokenMarksPerHour == 0 {
		o.TokenMarksPerHour = DefaultTokenMarksPerHour
	}
	o.applyMemory()
	o.Merger.EnsureDefaults()
}

// Validate reports every problem of o (after EnsureDefaults), joined: the
// store (a data directory, InMemory or Store), the limiters, and the
// bounds.
func (o *Options) Validate() error {
	var errs []error
	if o.Store == nil && o.Dir == "" && !o.InMemory {
		errs = append(errs, errors.New("coordinator: no data directory (set Options.Dir, or InMemory for a throwaway store, or merge.Store)"))
	}
	if err := o.Config.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("coordinator: config: %w", err))
	}
	if o.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("coordinator: Options.MaxBodyBytes must be positive (0 takes the default), got %d", o.MaxBodyBytes))
	}
	if o.MaxGroup < 0 {
		errs = append(errs, fmt.Errorf("coordinator: Options.MaxGroup must be positive (0 takes the default), got %d", o.MaxGroup))
	}
	if err := o.validateGrants(); err != nil {
		errs = append(errs, err)
	}
	if o.GCBudget < 0 {
		errs = append(errs, fmt.Errorf("coordinator: Options.GCBudget must be positive (0 takes the default), got %d", o.GCBudget))
	}
	if _, err := BudgetFor(o.MaxMemory); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, o.Merger.Validate())...)
}

// Coordinator serializes every operation on one Merger in a committer
// goroutine that group-commits: the requests that arrive while a commit is
// in flight are merged together and committed with one synced write.
type Coordinator struct {
	opts  Options
	store merge.Store
	m     *merge.Merger
	met   *metrics

	mu sync.Mutex // guards m (held by the committer for a whole group)

	reqs     chan *request
	quit     chan struct{}
	done     chan struct{}
	closeMu  sync.RWMutex
	closed   bool
	inflight sync.WaitGroup
	gcStop   chan struct{}
	gcDone   chan struct{}

	storeDown atomic.Bool // the last commit failed
	// probeWrite's last write (health.go) and its answer; under probeMu.
	probeMu    sync.Mutex
	probeAt    time.Time
	probeErr   error
	ckpt       *ckptJob             // the checkpoint being committed, or nil (c.mu)
	ckptLate   atomic.Bool          // another checkpoint is due: the one in flight stops resting
	lastJob    *commitJob           // the commit job of the last stage (c.mu)
	dash       *dashboard.Dashboard // what GET /ui shows (package dashboard)
	shared     *merge.SharedMerger  // set when the store is a SharedStore (shared.go)
	sharedDone chan struct{}        // closed when the shared merger's loop ends

	storeDownAt atomic.Int64 // when storeDown last became true, Unix ns (health.go)
	hist        *histRun     // the usage history, or nil (historyrun.go)

	bodies       *bodyBudget   // request bodies in memory (bodybudget.go)
	quota        *quotas       // what each token named this hour (quota.go)
	ctl          *control      // live control: run-time limits and pauses (control.go)
	log          *slog.Logger  // Options.Logger
	uncountedLog uncountedLog  // limiters of batches not counted, logged once (uncounted.go)
	ctlStop      chan struct{} // closed by Close: ends the control poll (shared mode)
	ctlDone      chan struct{} // closed when the control poll ended
	recNotes     recordNotes   // what noteRecords logged (records.go); under mu
}

// ckptJob is a checkpoint on its way to the store: it is committed by its
// own goroutine once the stage it snapshots is durable, so the commits of
// the next groups do not wait for it.
type ckptJob struct {
	ck    *merge.CheckpointOps
	after *commitJob // the job committing the last stage ck covers
	err   error
	done  chan struct{}
}

func (c *Coordinator) checkpoint(j *ckptJob) {
	defer close(j.done)
	<-j.after.done
	if j.err = j.after.err; j.err != nil {
		return // the snapshot holds state that never became durable
	}
	start := time.Now()
	var ops []merge.Op
	if ops, j.err = j.ck.Ops(); j.err == nil {
		j.err = commitThrottled(c.store, ops, &c.ckptLate, c.opts.Clock)
	}
	c.met.observeCheckpoint(time.Since(start))
}

// ckptChunk is the most ops of one checkpoint commit.
const ckptChunk = 4096

// commitThrottled commits ops in chunks of ckptChunk, resting between two
// chunks as long as the chunk took on clk (the coordinator's clock: a
// manual clock in tests never rests), so that a checkpoint takes at most
// about half of a core from the requests (one large commit holds a core
// and shows in the sync latency), unless late is set (the next
// checkpoint is already due: resting would let the log and the cache
// grow). The last op (the log deletion) goes in the last chunk: until it
// commits, a restart replays the log over the chunks already written,
// which only rewrites the same states.
func commitThrottled(s merge.Store, ops []merge.Op, late *atomic.Bool, clk clock.Clock) error {
	for len(ops) > 0 {
		n := min(len(ops), ckptChunk)
		t := clk.Now()
		if err := s.Commit(ops[:n]); err != nil {
			return err
		}
		if ops = ops[n:]; len(ops) > 0 && !late.Load() {
			if rest := clk.Now() - t; rest > 0 {
				<-clk.After(rest)
			}
		}
	}
	return nil
}

// ckptSettle reports a finished checkpoint to the Merger (c.mu held). With
// wait, it first waits for the checkpoint in flight, releasing c.mu
// meanwhile (its commit job takes c.mu to finish).
func (c *Coordinator) ckptSettle(wait bool) {
	j := c.ckpt
	if j == nil {
		return
	}
	if wait {
		c.mu.Unlock()
		<-j.done
		c.mu.Lock()
		if c.ckpt != j {
			return // settled by another caller meanwhile
		}
	} else {
		select {
		case <-j.done:
		default:
			return
		}
	}
	c.ckpt = nil
	c.m.Advance(merge.Done{Checkpoint: j.ck, Err: j.err})
}

// request is one unit of work for the committer.
type request struct {
	batch *wire.Batch
	scope string            // isolate namespace of batch (scope.go)
	pf    *merge.Prefetched // cold keys of batch read by the request goroutine
	reply *wire.Reply
	stale int64                                  // entries of batch dropped as stale (older than the key's window - 1)
	fn    func(m *merge.Merger, now int64) error // when batch is nil
	err   error
	done  chan struct{}
}

// Open opens the store and starts the committer.
func Open(opts Options) (*Coordinator, error) {
	opts.EnsureDefaults()
	opts.Merger.ReportPerScope = opts.Merger.ReportPerScope || opts.edgeTokens() > 1
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	store := opts.Store
	if store == nil {
		var err error
		fs, dir := vfs.Default, opts.Dir
		if opts.InMemory {
			fs, dir = vfs.NewMem(), ""
		}
		budget, _ := BudgetFor(opts.MaxMemory) // valid: checked above
		if store, err = pebblestore.OpenWith(fs, dir, pebblestore.Options{CacheSize: budget.BlockCache, DiskReserve: opts.DiskReserve}); err != nil {
			return nil, err
		}
	}
	ctl := newControl(opts.Config, controlStoreOf(store), !opts.Merger.NoResetNotices, opts.Logger)
	opts.Merger.Limits = ctl.limits
	m, err := merge.NewMerger(opts.Config, store, opts.Merger)
	if err != nil {
		store.Close()
		return nil, err
	}
	if cs, ok := store.(merge.ConcurrentStore); ok && cs.ConcurrentGet() {
		m.EnablePrefetch()
	}
	c := &Coordinator{opts: opts, store: store, m: m,
		reqs: make(chan *request, opts.MaxGroup), quit: make(chan struct{}), done: make(chan struct{}),
		gcStop: make(chan struct{}), gcDone: make(chan struct{}),
		ctl: ctl, log: opts.Logger, ctlStop: make(chan struct{}), ctlDone: make(chan struct{}),
		bodies: newBodyBudget(&opts), quota: newQuotas(opts.TokenKeysPerHour, opts.TokenIsolatesPerHour, opts.TokenMarksPerHour, opts.Logger)}
	c.met = newMetrics(c)
	c.dash = dashboard.New(opts.Config, opts.Clock.Now())
	obs := &observers{list: []merge.Observer{c.dash, c.met.lim}, limits: ctl.limits, cfg: opts.Config}
	if rec := c.openHistory(); rec != nil {
		obs.list = append(obs.list, rec)
	}
	m.SetObserver(obs)
	if ss, ok := store.(merge.SharedStore); ok {
		if err = claimLimiters(store, opts.Config); err != nil { // sharedlimiters.go
			c.closeHistory()
			store.Close()
			return nil, err
		}
		if c.shared, err = merge.NewSharedMerger(opts.Config, ss, opts.Merger, obs); err != nil {
			c.closeHistory()
			store.Close()
			return nil, err
		}
		c.sharedDone = make(chan struct{})
		c.shared.Run(opts.Clock.Now, c.quit, c.sharedDone)
		c.ctl.notices = false // shared mode sends no reset notices
	}
	if err := c.openControl(); err != nil {
		close(c.quit)
		if c.sharedDone != nil {
			<-c.sharedDone
		}
		store.Close()
		return nil, err
	}
	go c.loop()
	if opts.GCInterval > 0 && c.shared == nil {
		go c.gcLoop()
	} else {
		close(c.gcDone)
	}
	return c, nil
}

// Sync applies b (exactly once per (b.Isolate, b.Seq)) at the coordinator's
// clock, waits until it is durably committed, and returns the reply. The
// isolate is b.Isolate in the namespace of ctx (the bearer token's, set by
// Handler; none otherwise, see scope.go). A retry of the isolate's last
// applied batch is not applied again and gets the current views and leases.
// Errors: a *wire.FieldError (bad batch, unknown limiter, time ahead of the
// clock: ErrClockSkew; over a Redis store, an isolate id with braces;
// nothing applied), a *SeqError (ErrSequence: a sequence number that is
// neither the next nor a retry; nothing applied), a *QuotaError (ErrQuota:
// the token named more keys or isolates this hour than its quota, quota.go;
// nothing applied), ErrUnavailable (commit failed or the store reports
// errors; nothing applied; retry with the same Seq), ErrClosed.
func (c *Coordinator) Sync(ctx context.Context, b *wire.Batch) (*wire.Reply, error) {
	r, err := c.sync(ctx, b)
	if err != nil {
		return nil, err
	}
	return r.reply, nil
}

func (c *Coordinator) sync(ctx context.Context, b *wire.Batch) (_ *request, err error) {
	defer func() {
		var seq *merge.SeqError
		if errors.As(err, &seq) && seq.Anomaly == merge.SeqIdentity {
			// Not the isolate's batch (it lacks the incarnation's
			// secret): nothing of it is the isolate's to show. Counted
			// against it, five forged batches turned a healthy isolate
			// "failing" on the dashboard, with the refusal as its error.
			return
		}
		work := len(b.Entries) > 0 || len(b.Denials) > 0 || len(b.Signals) > 0
		c.dash.Synced(scopeOf(ctx), b.Isolate, work, err, c.opts.Clock.Now())
		if err == nil && b.End {
			c.dash.Ended(scopeOf(ctx), b.Isolate)
		}
	}()
	if err := c.m.Check(b); err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	if err := c.storeErr(); err != nil {
		return nil, err
	}
	if c.shared != nil && strings.ContainsAny(b.Isolate, "{}") {
		// Redis Cluster hashes a key on the first {...} in it, and the
		// isolate's mark (el:h<isolate>) has no tag before the id: such
		// an id would put the marks of all a client's isolates on the
		// master of its choice. Generated ids never hold braces.
		return nil, fmt.Errorf("coordinator: %w", &wire.FieldError{Field: "iso",
			Err: errors.New("with a Redis store an isolate id must not contain { or } (they would choose the hash slot of its mark)")})
	}
	var bucket func(limiter, key string) int
	if c.shared != nil {
		bucket = c.shared.BucketOf
	}
	if err := c.quota.admit(scopeOf(ctx), b, c.opts.Clock.Now(), bucket); err != nil {
		return nil, err
	}
	if c.shared != nil {
		r, err := c.syncShared(ctx, b)
		if err == nil {
			c.ctl.decorate(b, r.reply, c.opts.Clock.Now())
		}
		return r, err
	}
	// Read the cold keys here, in parallel with other requests, rather than
	// in the committer.
	r := &request{batch: b, scope: scopeOf(ctx), pf: c.m.Prefetch(b), done: make(chan struct{})}
	if err := c.submit(ctx, r); err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	c.ctl.decorate(b, r.reply, c.opts.Clock.Now())
	return r, nil
}

// KeyState returns the current state of (limiter, key).
func (c *Coordinator) KeyState(ctx context.Context, limiter, key string) (*merge.KeyState, error) {
	if c.shared != nil {
		return c.shared.KeyState(ctx, limiter, key, c.opts.Clock.Now())
	}
	var ks *merge.KeyState
	err := c.do(ctx, func(m *merge.Merger, now int64) (err error) {
		ks, err = m.KeyState(limiter, key, now)
		return err
	})
	return ks, err
}

// ResetKey clears (limiter, key) durably.
func (c *Coordinator) ResetKey(ctx context.Context, limiter, key string) error {
	if c.shared != nil {
		err := c.shared.Reset(limiter, key)
		if err == nil {
			c.forgetKey(limiter, key)
		}
		return err
	}
	err := c.do(ctx, func(m *merge.Merger, now int64) error { return m.ResetAt(limiter, key, now) })
	if err == nil {
		c.forgetKey(limiter, key)
	}
	return err
}

// forgetKey drops what the dashboard, the metrics and the history hold of
// the last view of (limiter, key), after a reset.
func (c *Coordinator) forgetKey(limiter, key string) {
	c.dash.Forget(limiter, key)
	c.met.lim.forget(limiter, key)
	if c.hist != nil {
		c.hist.rec.Forget(limiter, key)
	}
}

// GC runs one GC step now (see Merger.GC) and commits it. In shared mode
// it does nothing: records expire by their TTLs.
func (c *Coordinator) GC(ctx context.Context) (int, error) {
	if c.shared != nil {
		return 0, nil
	}
	var n int
	err := c.do(ctx, func(m *merge.Merger, now int64) (err error) {
		n, err = m.GC(now, c.opts.GCBudget)
		return err
	})
	return n, err
}

func (c *Coordinator) do(ctx context.Context, fn func(m *merge.Merger, now int64) error) error {
	r := &request{fn: fn, done: make(chan struct{})}
	if err := c.submit(ctx, r); err != nil {
		return err
	}
	return r.err
}

// submit hands r to the committer and waits for it. Once handed over, r is
// processed even if ctx ends, so a caller that gives up may find its batch
// applied; retrying with the same Seq is then answered as a duplicate.
func (c *Coordinator) submit(ctx context.Context, r *request) error {
	c.closeMu.RLock()
	if c.closed {
		c.closeMu.RUnlock()
		return ErrClosed
	}
	c.inflight.Add(1)
	c.closeMu.RUnlock()
	defer c.inflight.Done()
	select {
	case c.reqs <- r:
	case <-ctx.Done():
		return fmt.Errorf("coordinator: %w", ctx.Err())
	}
	<-r.done
	return nil
}

// loop is the committer goroutine. It pipelines: while the commit of one
// group is in flight (in its own goroutine), the next group is applied in
// memory; the next commit starts only when the previous one succeeded, and
// every reply (duplicates included) waits for its own group's commit, so no
// reply ever reflects state that is not durable.
func (c *Coordinator) loop() {
	defer close(c.done)
	var prev *commitJob
	defer func() {
		if prev != nil {
			<-prev.done
		}
	}()
	for {
		var r *request
		select {
		case r = <-c.reqs:
		case <-c.quit:
			return
		}
		group := make([]*request, 1, 16)
		group[0] = r
	drain:
		for len(group) < c.opts.MaxGroup {
			select {
			case r = <-c.reqs:
				group = append(group, r)
			default:
				break drain
			}
		}
		c.mu.Lock()
		// A failed commit makes the Merger replay the log before it reads
		// again; a checkpoint still being written must land first.
		for c.ckpt != nil && c.m.NeedsRecovery() {
			c.ckptSettle(true)
		}
		c.ckptSettle(false)
		now := c.opts.Clock.Now()
		for _, r := range group {
			if r.batch != nil {
				stale := c.m.Stats().DeltasStale
				r.reply, r.err = c.m.ApplyAs(r.batch, r.scope, now, r.pf)
				r.pf, r.stale = nil, c.m.Stats().DeltasStale-stale
			} else {
				r.err = r.fn(c.m, now)
			}
		}
		c.noteRecords()
		rd := c.m.Ready(now, c.ckpt != nil)
		job := &commitJob{group: group, ops: rd.Ops, gen: rd.Gen, aborts: rd.Aborts, done: make(chan struct{})}
		c.lastJob = job
		c.ckptLate.Store(rd.Late)
		if rd.Checkpoint != nil {
			c.ckpt = &ckptJob{ck: rd.Checkpoint, after: job, done: make(chan struct{})}
			go c.checkpoint(c.ckpt)
		}
		c.mu.Unlock()
		if prev != nil {
			<-prev.done
			if prev.err != nil && job.aborts < prev.aborts {
				// Applied on top of the failed group's state: fail it too.
				job.err = prev.err
			}
		}
		go c.commit(job)
		prev = job
	}
}

// commitJob is one group on its way to the store.
type commitJob struct {
	group []*request
	ops   []merge.Op
	gen   int64
	// aborts is Merger.Aborts when the group was applied; after a failed
	// commit, the failed job's aborts is Merger.Aborts after the abort.
	aborts int64
	err    error
	done   chan struct{}
}

func (c *Coordinator) commit(j *commitJob) {
	if j.err == nil && len(j.ops) > 0 {
		start := time.Now()
		j.err = c.store.Commit(j.ops)
		c.met.observeCommit(time.Since(start), len(j.group))
		c.dash.Committed(time.Since(start))
	}
	c.mu.Lock()
	c.m.Advance(merge.Done{Gen: j.gen, Err: j.err})
	if j.err != nil {
		j.aborts = c.m.Aborts()
	}
	c.mu.Unlock()
	if j.err != nil {
		c.setStoreDown(true)
		for _, r := range j.group {
			r.reply, r.err = nil, fmt.Errorf("%w: %w", ErrUnavailable, j.err)
		}
	} else if len(j.ops) > 0 {
		c.setStoreDown(false)
	}
	for _, r := range j.group {
		close(r.done)
	}
	close(j.done)
}

func (c *Coordinator) gcLoop() {
	defer close(c.gcDone)
	c.gcRun(newGCPacer(c.opts.GCInterval, c.opts.GCBudget, c.opts.GCPass), c.opts.Clock.After, c.gcStop)
}

// gcRun runs GC steps paced by p (gcpace.go) until stop is closed,
// waiting between two steps with after (Clock.After).
func (c *Coordinator) gcRun(p *gcPacer, after func(ns int64) <-chan struct{}, stop <-chan struct{}) {
	wait, budget := p.interval, p.budget
	for {
		select {
		case <-stop:
			return
		case <-after(int64(wait)):
		}
		var r merge.GCResult
		var took time.Duration
		err := c.do(context.Background(), func(m *merge.Merger, now int64) (err error) {
			start := time.Now()
			r, err = m.GCStep(now, budget)
			took = time.Since(start)
			return err
		})
		if err != nil {
			// The store fails or the coordinator closes: the idle pace.
			wait, budget = p.interval, p.budget
			continue
		}
		wait, budget = p.next(r, took)
	}
}

// Checkpoint writes every state logged so far to its own record and
// empties the log (see wal.go), and waits for it. The coordinator does this
// by itself (MergerOptions.Checkpoint*) and on Close; an explicit call
// shortens the replay of a restart after a crash, e.g. before a backup.
func (c *Coordinator) Checkpoint(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	return c.checkpointNow()
}

func (c *Coordinator) checkpointNow() error {
	c.mu.Lock()
	for c.ckpt != nil {
		c.ckptSettle(true)
	}
	if c.lastJob == nil || !c.m.CheckpointDue(math.MaxInt64) {
		c.mu.Unlock()
		return nil
	}
	// Between two groups nothing is applied but not staged, and the
	// checkpoint waits for the last stage to be durable.
	j := &ckptJob{ck: c.m.Checkpoint(c.opts.Clock.Now()), after: c.lastJob, done: make(chan struct{})}
	c.ckpt = j
	c.mu.Unlock()
	c.checkpoint(j)
	c.mu.Lock()
	if c.ckpt == j {
		c.ckptSettle(false)
	}
	c.mu.Unlock()
	return j.err
}

// Close stops accepting work, finishes every request already submitted
// (their commits complete), stops the committer and closes the store.
func (c *Coordinator) Close() error {
	c.closeMu.Lock()
	if c.closed {
		c.closeMu.Unlock()
		return ErrClosed
	}
	c.closed = true
	c.closeMu.Unlock()
	close(c.gcStop)
	<-c.gcDone
	close(c.ctlStop)
	<-c.ctlDone
	c.inflight.Wait()
	close(c.quit)
	<-c.done
	if c.sharedDone != nil {
		<-c.sharedDone
	}
	c.closeHistory()
	// A last checkpoint leaves an empty log, so the next Open replays
	// nothing; if it fails, the next Open replays the log instead. No
	// request waits any more: its chunks need not rest.
	c.ckptLate.Store(true)
	err := c.checkpointNow()
	if err != nil {
		err = fmt.Errorf("coordinator: final checkpoint: %w", err)
	}
	if terr := c.saveTold(); terr != nil { // the keys told of a pause (control.go)
		err = errors.Join(err, fmt.Errorf("coordinator: storing the keys told of a pause: %w", terr))
	}
	if cerr := c.store.Close(); cerr != nil {
		return cerr
	}
	return err
}

// withMerger runs fn with the Merger locked (between two groups).
func (c *Coordinator) withMerger(fn func(m *merge.Merger)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c.m)
}
