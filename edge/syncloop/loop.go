package syncloop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/edgelimit/edgelimit/clock"
)

// Clock is the time source of a Loop (in the edge host its Options.Clock,
// under the coordinator's offset; clock.Manual in tests): the system's one clock abstraction.
type Clock = clock.Clock

// Transport sends a batch (msgpack wire.Batch) to the coordinator and
// returns its reply (msgpack wire.Reply) appended to dst. An error means
// the batch may or may not have been applied; it is retried with the same
// sequence number.
type Transport interface {
	Sync(ctx context.Context, batch, dst []byte) ([]byte, error)
}

// Module is the isolate side of a sync (isolate.Isolate implements it). A
// Loop calls it from its own goroutine: when the host also decides
// requests on the same isolate, it must serialize the calls (an isolate is
// single-threaded).
type Module interface {
	// SyncOut returns the batch to send appended to dst, dst unchanged
	// when there is nothing to sync; the same batch again until a reply
	// is applied.
	SyncOut(ctx context.Context, now int64, dst []byte) ([]byte, error)
	// SyncIn applies the coordinator's reply at now.
	SyncIn(ctx context.Context, reply []byte, now int64) error
}

// Reincarnator is a Module that can start a new incarnation
// (isolate.Isolate implements it). When the transport's error matches
// ErrSequence (the coordinator refused the batch's sequence number and
// applied nothing), the Loop calls Reincarnate and resends at once: the
// module takes a new isolate id and makes its outstanding batch batch 1 of
// it, so its deltas count. A Module without it retries like after any
// failure, and the coordinator keeps refusing.
type Reincarnator interface {
	Reincarnate(ctx context.Context) error
}

// Recaller is a Module that can take its outstanding batch back
// (isolate.Isolate implements it). When the transport's error matches
// ErrClockSkew (the coordinator refused the batch for times ahead of its
// clock and applied nothing), the Loop calls Recall and, when it took a
// batch back, cuts and sends one again at once, at the Loop's clock (the
// coordinator's time, which the refusal carried: clock.Offset). A Module
// without it retries the same batch, refused until the coordinator's clock
// reaches it.
type Recaller interface {
	Recall(ctx context.Context, now int64) (bool, error)
}

// Answerer is a Module whose batch in flight may be answered by another
// reply than its attempt's (the edge host's amendments: an amendment of
// the batch sent next to it, whose reply the module takes as the batch's).
// When the attempt then fails (its reply lost, a timeout, a refusal of a
// batch already answered), the Loop asks Answered: true means the batch
// was answered, so the sync succeeded and no backoff follows (a failure
// would hold the next batch, and the early syncs held requests ask for,
// back for the backoff).
type Answerer interface {
	Answered() bool
}

// Reader is a Transport that must read the coordinator's time before the
// isolate's first batch is cut (HTTPTransport with Time set): the cost an
// isolate admitted before it knew that time is in windows of its own
// clock, and the module moves it to the coordinator's windows when told
// the step (wasm/core retime.go), which a batch cut before would not
// carry. Ready returns nil once the coordinator answered anything.
type Reader interface {
	Ready(ctx context.Context) error
}

// ErrBatchTooLarge is returned when the module's batch exceeds
// Options.MaxBatchBytes.
var ErrBatchTooLarge = errors.New("syncloop: batch too large")

// Loop runs the syncs of one isolate. Create it with NewLoop, run it with
// Run, and call Kick when a decision returns SyncWanted.
type Loop struct {
	sched *Scheduler
	clock Clock
	tr    Transport
	mod   Module
	kick  chan struct{}
	batch []byte
	reply []byte

	// The attempt in flight's cancel (EndAttempt), and when the batch of
	// a failed attempt was answered since (Recovered; 0: not).
	attemptMu   sync.Mutex
	endAttempt  context.CancelCauseFunc
	recoveredAt atomic.Int64

	// OnError, when set, is called with every failed attempt's error.
	OnError func(error)
}

// NewLoop returns a Loop for mod. seed makes the jitter reproducible.
func NewLoop(opts Options, clock Clock, tr Transport, mod Module, seed uint64) (*Loop, error) {
	if clock == nil || tr == nil || mod == nil {
		return nil, errors.New("syncloop: clock, transport and module are required")
	}
	s, err := New(opts, clock.Now(), seed)
	if err != nil {
		return nil, err
	}
	return &Loop{sched: s, clock: clock, tr: tr, mod: mod, kick: make(chan struct{}, 1)}, nil
}

// Scheduler returns the loop's scheduler (for Stale and Failures; do not
// drive it while Run runs).
func (l *Loop) Scheduler() *Scheduler { return l.sched }

// Kick asks for an early sync (the module returned SyncWanted), or, while
// syncs fail, for a probe of the coordinator (Scheduler.Probe). It never
// blocks; the loop honours Options.MinSpacing and Options.ProbeInterval.
func (l *Loop) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// EndAttempt ends the attempt in flight, whose batch another reply
// answered (an amendment's: see Answerer): the loop does not wait for the
// attempt's own reply, or, when that is lost, for the transport's timeout
// (the next batch would wait as long). Its transport call is cancelled,
// and it counts as a good sync when the Module's Answered says so. It
// never blocks.
func (l *Loop) EndAttempt() { l.end(context.Canceled) }

// AbandonAttempt ends the attempt in flight as hung (the edge host's
// probeSlot: a request found it in flight past a second): its transport
// call is cancelled with the cause ErrAbandoned, so the next attempt goes
// to the next coordinator of the list (HTTPTransport.Sync), and it counts
// as a failed sync. The attempt may still be reading the coordinator's
// time (Reader): that read is abandoned too. It never blocks.
func (l *Loop) AbandonAttempt() { l.end(ErrAbandoned) }

// end cancels the attempt in flight with cause.
func (l *Loop) end(cause error) {
	l.attemptMu.Lock()
	if l.endAttempt != nil {
		l.endAttempt(cause)
	}
	l.attemptMu.Unlock()
}

// ErrAbandoned is the cause of an attempt's context that was abandoned as
// hung (AbandonAttempt).
var ErrAbandoned = errors.New("syncloop: the attempt was abandoned as hung")

// Recovered tells the loop that at now another reply (an amendment's)
// answered the batch of its last attempt, which had failed: the sync
// succeeded, so the loop stops backing off (an early sync is taken at
// once again). It never blocks.
func (l *Loop) Recovered(now int64) {
	l.recoveredAt.Store(max(now, 1))
	l.Kick()
}

// Run syncs until ctx is done and returns ctx.Err().
func (l *Loop) Run(ctx context.Context) error {
	for {
		now := l.clock.Now()
		if l.sched.Due(now) {
			l.report(l.SyncOnce(ctx))
			continue
		}
		wait := l.clock.After(max(l.sched.Next()-now, 0))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.kick:
			now := l.clock.Now()
			// Recovered after the last attempt began: that attempt's
			// batch was answered (a later attempt is another batch).
			if at := l.recoveredAt.Swap(0); at != 0 && at >= l.sched.lastStart && l.sched.Failures() > 0 {
				l.sched.Success(at)
			}
			if l.sched.Want(now) || l.sched.Probe(now) {
				l.report(l.SyncOnce(ctx))
			}
		case <-wait:
		}
	}
}

// report tells OnError of err, an attempt's failure, unless the attempt
// was ended from outside (EndAttempt, AbandonAttempt: whoever ended it
// knows) or the loop stopped.
func (l *Loop) report(err error) {
	if err != nil && l.OnError != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrAbandoned) {
		l.OnError(err)
	}
}

// SyncOnce runs one attempt now, whatever the schedule: cut (or re-send)
// the batch, send it, apply the reply.
func (l *Loop) SyncOnce(ctx context.Context) error {
	// The attempt's context, from its start: EndAttempt and AbandonAttempt
	// end it, the read of the coordinator's time included (a coordinator
	// that hangs from the start held that read for the whole sync timeout,
	// 5 s, where nothing could abandon it).
	actx, cancel := context.WithCancelCause(ctx)
	l.attemptMu.Lock()
	l.endAttempt = cancel
	l.attemptMu.Unlock()
	defer func() {
		l.attemptMu.Lock()
		l.endAttempt = nil
		l.attemptMu.Unlock()
		cancel(context.Canceled)
	}()
	ctx = actx
	now := l.clock.Now()
	if rd, ok := l.tr.(Reader); ok {
		if err := rd.Ready(ctx); err != nil {
			// An attempt that began at now (Probe spaces the next one
			// from it) and failed.
			l.sched.Begin(now)
			l.sched.Failure(l.clock.Now())
			return fmt.Errorf("syncloop: the coordinator's time: %w", err)
		}
		now = l.clock.Now()
	}
	b, err := l.mod.SyncOut(ctx, now, l.batch[:0])
	if err != nil {
		l.sched.Failure(now)
		return fmt.Errorf("syncloop: sync out: %w", err)
	}
	l.batch = b
	if len(b) == 0 {
		l.sched.Idle(now)
		return nil
	}
	if len(b) > l.sched.opts.MaxBatchBytes {
		l.sched.Failure(now)
		l.batch = nil // do not keep a huge buffer
		return fmt.Errorf("%w: %d bytes, more than %d", ErrBatchTooLarge, len(b), l.sched.opts.MaxBatchBytes)
	}
	l.sched.Begin(now)
	r, err := l.tr.Sync(ctx, b, l.reply[:0])
	if ri, ok := l.mod.(Reincarnator); ok && errors.Is(err, ErrSequence) {
		if r, err = l.reincarnate(ctx, ri, err); err != nil {
			l.sched.Failure(l.clock.Now())
			return err
		}
	}
	if rc, ok := l.mod.(Recaller); ok && errors.Is(err, ErrClockSkew) {
		var sent bool
		if r, sent, err = l.recall(ctx, rc, err); err == nil && !sent {
			l.sched.Idle(l.clock.Now())
			return nil
		}
	}
	if err != nil {
		if an, ok := l.mod.(Answerer); ok && an.Answered() {
			l.sched.Success(l.clock.Now())
			return nil
		}
		l.sched.Failure(l.clock.Now())
		return fmt.Errorf("syncloop: transport: %w", err)
	}
	l.reply = r
	now = l.clock.Now()
	if err := l.mod.SyncIn(ctx, r, now); err != nil {
		l.sched.Failure(now)
		return fmt.Errorf("syncloop: sync in: %w", err)
	}
	l.sched.Success(now)
	return nil
}

// recall handles a batch refused for its times (cause): the module takes
// it back and a batch cut again is sent at once. sent is false when the
// module had nothing to send after taking it back; err is cause when it
// took nothing back.
func (l *Loop) recall(ctx context.Context, rc Recaller, cause error) (_ []byte, sent bool, _ error) {
	ok, err := rc.Recall(ctx, l.clock.Now())
	if err != nil {
		return nil, false, fmt.Errorf("syncloop: recall after %w: %w", cause, err)
	}
	if !ok {
		return nil, false, cause
	}
	b, err := l.mod.SyncOut(ctx, l.clock.Now(), l.batch[:0])
	if err != nil {
		return nil, false, fmt.Errorf("syncloop: sync out after a recall: %w", err)
	}
	l.batch = b
	if len(b) == 0 {
		return nil, false, nil
	}
	if len(b) > l.sched.opts.MaxBatchBytes {
		l.batch = nil // do not keep a huge buffer
		return nil, false, fmt.Errorf("%w: %d bytes cut again, more than %d", ErrBatchTooLarge, len(b), l.sched.opts.MaxBatchBytes)
	}
	r, err := l.tr.Sync(ctx, b, l.reply[:0])
	if err != nil {
		return nil, false, fmt.Errorf("syncloop: transport (batch cut again): %w", err)
	}
	return r, true, nil
}

// reincarnate handles a refused sequence number (cause): a new incarnation
// of the module, and its first batch (the same deltas) sent at once.
func (l *Loop) reincarnate(ctx context.Context, ri Reincarnator, cause error) ([]byte, error) {
	if err := ri.Reincarnate(ctx); err != nil {
		return nil, fmt.Errorf("syncloop: reincarnate after %w: %w", cause, err)
	}
	b, err := l.mod.SyncOut(ctx, l.clock.Now(), l.batch[:0])
	if err != nil {
		return nil, fmt.Errorf("syncloop: sync out after reincarnating: %w", err)
	}
	l.batch = b
	if len(b) == 0 {
		return nil, fmt.Errorf("syncloop: no batch to resend after reincarnating (%w)", cause)
	}
	r, err := l.tr.Sync(ctx, b, l.reply[:0])
	if err != nil {
		return nil, fmt.Errorf("syncloop: transport (new incarnation): %w", err)
	}
	return r, nil
}
