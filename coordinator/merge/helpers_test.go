package merge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

const sec = coordtest.Sec

const t0 = coordtest.T0

// testConfig has one limiter of each kind.
var testConfig = coordtest.Config

// fakeClock is a settable clock in ns.
type fakeClock struct{ t atomic.Int64 }

func (f *fakeClock) now() int64        { return f.t.Load() }
func (f *fakeClock) set(t int64)       { f.t.Store(t) }
func (f *fakeClock) add(d int64) int64 { return f.t.Add(d) }

// memStore is an in-memory Store: a map, scanned in key order.
type memStore struct {
	mu sync.Mutex
	kv map[string][]byte
}

func newMemStore() *memStore { return &memStore{kv: map[string][]byte{}} }

func (s *memStore) Get(key []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kv[string(key)]
	return bytes.Clone(v), ok, nil
}

func (s *memStore) Commit(ops []Op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range ops {
		switch {
		case op.End != nil:
			for k := range s.kv {
				if k >= string(op.Key) && k < string(op.End) {
					delete(s.kv, k)
				}
			}
		case op.Delete:
			delete(s.kv, string(op.Key))
		default:
			s.kv[string(op.Key)] = bytes.Clone(op.Value)
		}
	}
	return nil
}

func (s *memStore) Scan(prefix, start []byte, fn func(key, value []byte) bool) error {
	s.mu.Lock()
	var ks []string
	for k := range s.kv {
		if bytes.HasPrefix([]byte(k), prefix) && k >= string(start) {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	vs := make([][]byte, len(ks))
	for i, k := range ks {
		vs[i] = s.kv[k]
	}
	s.mu.Unlock()
	for i, k := range ks {
		if !fn([]byte(k), vs[i]) {
			break
		}
	}
	return nil
}

func (s *memStore) Close() error { return nil }

// testOptions configure newTestCoordinator.
type testOptions struct {
	Config wire.Config
	Clock  clock.Clock
	Store  Store
	Merger MergerOptions
}

// testCoordinator drives a Merger as the coordinator does, without its
// pipeline: each Sync applies one batch and commits it.
type testCoordinator struct {
	mu    sync.Mutex
	m     *Merger
	store Store
	opts  testOptions
	sh    *sharedTest // on a shared store (sharedparity_test.go): Sync and KeyState go to a SharedMerger
}

// newTestCoordinator returns a Merger over a memStore at virtual time t0.
func newTestCoordinator(t testing.TB, t0 int64, mod func(*testOptions)) (*testCoordinator, *fakeClock) {
	t.Helper()
	clk := &fakeClock{}
	clk.set(t0)
	opts := testOptions{Config: testConfig(), Clock: clock.Func(clk.now), Store: newMemStore()}
	if mod != nil {
		mod(&opts)
	}
	if onShared {
		return newSharedTestCoordinator(t, opts), clk
	}
	m, err := NewMerger(opts.Config, opts.Store, opts.Merger)
	if err != nil {
		t.Fatal(err)
	}
	return &testCoordinator{m: m, store: opts.Store, opts: opts}, clk
}

// Sync applies b at the clock's time and commits it.
func (c *testCoordinator) Sync(ctx context.Context, b *wire.Batch) (*wire.Reply, error) {
	if c.sh != nil {
		return c.sh.sync(ctx, c, b)
	}
	if err := c.m.Check(b); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	rp, err := c.m.Apply(b, now)
	if cerr := c.m.Commit(now); cerr != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, cerr)
	}
	return rp, err
}

// KeyState returns the state of (limiter, key) now.
func (c *testCoordinator) KeyState(ctx context.Context, limiter, key string) (*KeyState, error) {
	if c.sh != nil {
		return c.sh.sm.KeyState(ctx, limiter, key, c.opts.Clock.Now())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m.KeyState(limiter, key, c.opts.Clock.Now())
}

// Checkpoint commits a checkpoint now, if anything was logged since the
// last one.
func (c *testCoordinator) Checkpoint(context.Context) error {
	if c.sh != nil {
		return nil // every Sync wrote its state to the shared store
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.m.CheckpointDue(1<<63 - 1) {
		return nil
	}
	ck := c.m.Checkpoint(c.opts.Clock.Now())
	ops, _ := ck.Ops()
	err := c.store.Commit(ops)
	c.m.Advance(Done{Checkpoint: ck, Err: err})
	return err
}

// withMerger runs fn with the Merger locked.
func (c *testCoordinator) withMerger(fn func(m *Merger)) {
	if c.sh != nil {
		c.sh.withView(c, fn)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c.m)
}

// batch, amend, mustSync and viewOf are coordtest's.
var (
	batch    = coordtest.Batch
	amend    = coordtest.Amend
	mustSync = coordtest.MustSync
	viewOf   = coordtest.ViewOf
)

func getKey(t testing.TB, c *testCoordinator, limiter, key string) *KeyState {
	t.Helper()
	ks, err := c.KeyState(context.Background(), limiter, key)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// openMemStore returns a new, empty memStore (in the shape of the stores'
// Open functions).
func openMemStore() (*memStore, error) { return newMemStore(), nil }

// reopenMemStore returns s, as a restart finds it (Close keeps its data).
func reopenMemStore(s *memStore) (*memStore, error) { return s, nil }

// flakyStore fails every Commit while failing is set, like a full disk.
type flakyStore struct {
	Store
	failing atomic.Bool
}

var errDiskFull = errors.New("no space left on device")

func (s *flakyStore) Commit(ops []Op) error {
	if s.failing.Load() {
		return errDiskFull
	}
	return s.Store.Commit(ops)
}
