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
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Options configure a Host. Zero fields take the documented defaults.
type Options struct {
	// Config holds the limiters; IsolateID is ignored (each isolate gets
	// IDPrefix-N).
	Config wire.Config
	// Isolates is the number of isolates. Default 4.
	Isolates int
	// Coordinator is the coordinator's base URL ("http://127.0.0.1:7070").
	// Empty runs without syncing: every isolate decides alone.
	Coordinator string
	// Token is the bearer token for the coordinator.
	Token string
	// Sync configures the sync loops (interval default 100ms).
	Sync syncloop.Options
	// RetryWait is how long a request the module answered with SyncRetry
	// (strict lease miss, read-through cold key) waits for the next sync
	// before it is decided again. Default 1s; negative denies at once.
	RetryWait time.Duration
	// IDPrefix names the isolates in sync batches. Default
	// "edge-<hostname>-<pid>-<start time>", unique per process.
	IDPrefix string
}

// DefaultIsolates is the default number of isolates.
const DefaultIsolates = 4

// DefaultRetryWait is the default wait of a SyncRetry request.
const DefaultRetryWait = time.Second

// Host runs the isolates and their sync loops. It is safe for concurrent
// use: each isolate is used by one goroutine at a time.
type Host struct {
	opts   Options
	rt     *isolate.Runtime
	slots  []*slot
	next   atomic.Uint64
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   atomic.Int64
}

// slot is one isolate with its lock, its sync loop and a broadcast of
// completed syncs.
type slot struct {
	mu     sync.Mutex
	iso    *isolate.Isolate
	loop   *syncloop.Loop
	syncMu sync.Mutex
	synced chan struct{} // closed and replaced after every applied reply
}

// New starts a host: it compiles the module, starts the isolates and, when
// a coordinator is set, their sync loops (stopped by Close).
func New(ctx context.Context, opts Options) (*Host, error) {
	if opts.Isolates <= 0 {
		opts.Isolates = DefaultIsolates
	}
	if opts.RetryWait == 0 {
		opts.RetryWait = DefaultRetryWait
	}
	if opts.IDPrefix == "" {
		name, _ := os.Hostname()
		opts.IDPrefix = fmt.Sprintf("edge-%s-%d-%d", name, os.Getpid(), time.Now().UnixNano())
	}
	if opts.Config.Version == 0 {
		opts.Config.Version = wire.Version
	}
	rt, err := isolate.NewRuntime(ctx, isolate.Options{})
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	h := &Host{opts: opts, rt: rt, cancel: cancel}
	tr := &syncloop.HTTPTransport{URL: opts.Coordinator, Token: opts.Token}
	for i := 0; i < opts.Isolates; i++ {
		cfg := opts.Config
		cfg.IsolateID = opts.IDPrefix + "-" + strconv.Itoa(i)
		iso, err := rt.NewIsolate(ctx, cfg, uint64(i))
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("host: %w", err)
		}
		s := &slot{iso: iso, synced: make(chan struct{})}
		h.slots = append(h.slots, s)
		if opts.Coordinator == "" {
			continue
		}
		if s.loop, err = syncloop.NewLoop(opts.Sync, syncloop.RealClock{}, tr, lockedModule{s}, uint64(i)); err != nil {
			h.Close()
			return nil, fmt.Errorf("host: %w", err)
		}
		s.loop.OnError = func(error) { h.errs.Add(1) }
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			s.loop.Run(lctx)
		}()
	}
	return h, nil
}

// Close stops the sync loops and releases the isolates.
func (h *Host) Close() error {
	h.cancel()
	h.wg.Wait()
	return h.rt.Close(context.Background())
}

// SyncErrors returns how many sync attempts failed since the start.
func (h *Host) SyncErrors() int64 { return h.errs.Load() }

// Config returns the limiters the host runs.
func (h *Host) Config() wire.Config { return h.opts.Config }

// Decide decides checks (all or nothing) at now (ns) on the next isolate.
// A SyncRetry answer waits for that isolate's next sync (at most
// Options.RetryWait) and is decided once more.
func (h *Host) Decide(ctx context.Context, checks []isolate.Check, now func() int64) (isolate.Decision, error) {
	s := h.slots[h.next.Add(1)%uint64(len(h.slots))]
	d, wait, err := s.decide(ctx, checks, now())
	if err != nil || !d.SyncRetry || s.loop == nil || h.opts.RetryWait < 0 {
		return d, err
	}
	select {
	case <-wait:
	case <-time.After(h.opts.RetryWait):
		return d, nil
	case <-ctx.Done():
		return d, ctx.Err()
	}
	d, _, err = s.decide(ctx, checks, now())
	return d, err
}

// decide runs one decision on the slot's isolate and kicks its loop when
// the module asks for a sync. It returns the channel closed by the next
// applied reply.
func (s *slot) decide(ctx context.Context, checks []isolate.Check, now int64) (isolate.Decision, <-chan struct{}, error) {
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
	s.mu.Unlock()
	if err != nil {
		return d, nil, fmt.Errorf("host: %w", err)
	}
	if d.SyncWanted && s.loop != nil {
		s.loop.Kick()
	}
	return d, wait, nil
}

// lockedModule gives the sync loop serialized access to the isolate and
// announces every applied reply.
type lockedModule struct{ s *slot }

func (m lockedModule) SyncOut(ctx context.Context, now int64, dst []byte) ([]byte, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	return m.s.iso.SyncOut(ctx, now, dst)
}

func (m lockedModule) SyncIn(ctx context.Context, reply []byte, now int64) error {
	m.s.mu.Lock()
	err := m.s.iso.SyncIn(ctx, reply, now)
	m.s.mu.Unlock()
	if err != nil {
		return err
	}
	m.s.syncMu.Lock()
	close(m.s.synced)
	m.s.synced = make(chan struct{})
	m.s.syncMu.Unlock()
	return nil
}

// ErrBadRequest marks a request the host refuses (see the HTTP handler).
var ErrBadRequest = errors.New("host: bad request")
