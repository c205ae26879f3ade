package syncloop

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

func newSched(t *testing.T, o Options) *Scheduler {
	t.Helper()
	s, err := New(o, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFirstSyncWithinOneInterval(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		s, err := New(Options{Interval: 100 * time.Millisecond}, 1000, seed)
		if err != nil {
			t.Fatal(err)
		}
		if n := s.Next(); n <= 1000 || n > 1000+100*ms {
			t.Fatalf("seed %d: first sync at %d, want in (1000, 1000+100ms]", seed, n)
		}
	}
}

func TestIntervalWithJitter(t *testing.T) {
	s := newSched(t, Options{Interval: 100 * time.Millisecond, Jitter: 0.2})
	now := int64(0)
	seen := map[int64]bool{}
	for i := 0; i < 200; i++ {
		now = s.Next()
		s.Begin(now)
		if s.Next() != Never || s.Due(now+time.Hour.Nanoseconds()) {
			t.Fatal("in flight: no sync may be due")
		}
		s.Success(now + ms)
		gap := s.Next() - (now + ms)
		if gap < 80*ms || gap > 120*ms {
			t.Fatalf("gap %v outside 100ms±20%%", time.Duration(gap))
		}
		seen[gap] = true
	}
	if len(seen) < 10 {
		t.Fatalf("jitter produced only %d distinct gaps", len(seen))
	}
}

func TestNoJitter(t *testing.T) {
	s := newSched(t, Options{Interval: 50 * time.Millisecond, Jitter: -1})
	s.Begin(10)
	s.Success(20)
	if s.Next() != 20+50*ms {
		t.Fatalf("next %d, want %d", s.Next(), 20+50*ms)
	}
}

func TestEarlySyncMinSpacing(t *testing.T) {
	s := newSched(t, Options{Interval: 100 * time.Millisecond, MinSpacing: 10 * time.Millisecond, Jitter: -1})
	// Before any sync an early one may start at once.
	if !s.Want(5 * ms) {
		t.Fatal("first early sync refused")
	}
	s.Begin(5 * ms)
	if s.Want(6 * ms) {
		t.Fatal("early sync allowed while one is in flight")
	}
	s.Success(7 * ms)
	if s.Next() != 107*ms {
		t.Fatalf("next %v", time.Duration(s.Next()))
	}
	// 3 ms after the last start: too close; moved to 15 ms.
	if s.Want(8 * ms) {
		t.Fatal("early sync allowed within the minimum spacing")
	}
	if s.Next() != 15*ms {
		t.Fatalf("next after refused early sync %v, want 15ms", time.Duration(s.Next()))
	}
	if !s.Want(15 * ms) {
		t.Fatal("early sync refused after the spacing")
	}
}

func TestEarlySyncDisabled(t *testing.T) {
	s := newSched(t, Options{MinSpacing: -1})
	n := s.Next()
	if s.Want(0) || s.Next() != n {
		t.Fatal("early sync taken although disabled")
	}
}

func TestBackoff(t *testing.T) {
	s := newSched(t, Options{Interval: 100 * time.Millisecond, BackoffBase: 10 * time.Millisecond,
		BackoffMax: 50 * time.Millisecond, Jitter: -1})
	now := int64(0)
	// Doubling, and never longer than the syncs have failed: so each
	// wait is about the outage's age, up to the cap.
	want := []int64{10, 10, 20, 40, 50, 50}
	for i, w := range want {
		s.Begin(now)
		s.Failure(now)
		if got := s.Next() - now; got != w*ms {
			t.Fatalf("failure %d: wait %v, want %dms", i+1, time.Duration(got), w)
		}
		if s.Want(now) {
			t.Fatal("early sync allowed while backing off")
		}
		now = s.Next()
	}
	s.Begin(now)
	s.Success(now)
	if s.Failures() != 0 || s.Next()-now != 100*ms {
		t.Fatal("success did not reset the backoff")
	}
}

// Attempts a request starts past the backoff (Probe) fail too, and each
// failure doubles the next wait; but no wait is longer than the syncs have
// failed: 31 failures in 5 s wait at most 5 s, not BackoffMax.
func TestBackoffFollowsTheOutage(t *testing.T) {
	s := newSched(t, Options{Interval: 100 * time.Millisecond, Jitter: -1})
	now := int64(1000 * ms)
	for range 31 {
		s.Begin(now)
		s.Failure(now)
		now += 160 * ms // requests probe every 160 ms or so
	}
	if wait := s.Next() - (now - 160*ms); wait > 5*int64(time.Second) {
		t.Fatalf("after 31 failures over %v: the next attempt in %v, want at most the outage's age", time.Duration(30*160*ms), time.Duration(wait))
	}
	// A long outage reaches the cap.
	s.Failure(now + int64(time.Minute))
	if wait := s.Next() - (now + int64(time.Minute)); wait != int64(DefaultBackoffMax) {
		t.Fatalf("a minute into the outage: wait %v, want the cap %v", time.Duration(wait), DefaultBackoffMax)
	}
}

func TestStale(t *testing.T) {
	s := newSched(t, Options{Interval: 100 * time.Millisecond})
	if s.Stale(10_000 * ms) {
		t.Fatal("stale while idle: no sync failed")
	}
	s.Begin(100 * ms)
	if s.Stale(300 * ms) {
		t.Fatal("stale at exactly 3 intervals")
	}
	if s.Stale(401*ms) || s.Stale(1100*ms) {
		t.Fatal("stale with an attempt in flight for up to SlowAttempt: a slow coordinator is not a failing one")
	}
	if !s.Stale(1101 * ms) {
		t.Fatal("not stale with an attempt in flight for more than SlowAttempt, after 3 intervals")
	}
	s.Failure(402 * ms)
	if !s.Stale(403 * ms) {
		t.Fatal("not stale after a failure, 3 intervals after the last sync")
	}
	probe := int64(DefaultProbeInterval)
	if s.Want(403*ms) || s.Probe(100*ms+probe-1) || !s.Probe(100*ms+probe) {
		t.Fatal("a request on failing syncs does not probe past the backoff, once per probe interval after the last start")
	}
	s.Begin(100*ms + probe)
	if s.Probe(100*ms + 2*probe) {
		t.Fatal("a probe while an attempt is in flight")
	}
	s.Failure(101*ms + probe)
	if !s.Probe(100*ms + 2*probe) {
		t.Fatal("no probe one probe interval after the last")
	}
	s.Begin(1000 * ms)
	s.Success(1001 * ms)
	if s.Stale(1400*ms) || s.Probe(2000*ms) {
		t.Fatal("stale or probing after a success")
	}
}

func TestValidate(t *testing.T) {
	if _, err := New(Options{Interval: -1}, 0, 0); err == nil {
		t.Fatal("negative interval accepted")
	}
	if _, err := New(Options{Jitter: 1.5}, 0, 0); err == nil {
		t.Fatal("jitter 1.5 accepted")
	}
	if _, err := New(Options{BackoffBase: time.Minute, BackoffMax: time.Second}, 0, 0); err == nil {
		t.Fatal("base above max accepted")
	}
}

// fakeClock advances only when After is waited on: After(d) moves time by d
// at once, so Run progresses without sleeping.
type fakeClock struct {
	mu  sync.Mutex
	now int64
}

func (c *fakeClock) Now() int64 { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) After(d int64) <-chan struct{} {
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
	ch := make(chan struct{}, 1)
	ch <- struct{}{}
	return ch
}

// fakeModule emits batch "b<seq>" while it has pending work and resends the
// same batch until a reply is applied.
type fakeModule struct {
	seq, applied int
	outstanding  bool
	pending      bool
	syncIns      []int64
}

func (m *fakeModule) SyncOut(_ context.Context, _ int64, dst []byte) ([]byte, error) {
	if !m.outstanding {
		if !m.pending {
			return dst, nil
		}
		m.seq++
		m.outstanding, m.pending = true, false
	}
	return append(dst, byte('0'+m.seq)), nil
}

func (m *fakeModule) SyncIn(_ context.Context, reply []byte, now int64) error {
	if !m.outstanding || int(reply[0]-'0') != m.seq {
		return errors.New("stale reply")
	}
	m.outstanding = false
	m.applied++
	m.syncIns = append(m.syncIns, now)
	return nil
}

type fakeTransport struct {
	fail int // fail this many calls first
	sent [][]byte
}

func (f *fakeTransport) Sync(_ context.Context, batch, dst []byte) ([]byte, error) {
	f.sent = append(f.sent, append([]byte(nil), batch...))
	if f.fail > 0 {
		f.fail--
		return dst, errors.New("connection refused")
	}
	return append(dst, batch...), nil
}

func TestLoopRetriesReuseBatch(t *testing.T) {
	clk := &fakeClock{}
	mod := &fakeModule{pending: true}
	tr := &fakeTransport{fail: 3}
	l, err := NewLoop(Options{Interval: 100 * time.Millisecond, Jitter: -1, BackoffBase: 10 * time.Millisecond}, clk, tr, mod, 1)
	if err != nil {
		t.Fatal(err)
	}
	var errs int
	l.OnError = func(error) { errs++ }
	for i := 0; i < 4; i++ {
		if err := l.SyncOnce(context.Background()); (err != nil) != (i < 3) {
			t.Fatalf("attempt %d: err %v", i, err)
		}
	}
	if len(tr.sent) != 4 || mod.applied != 1 {
		t.Fatalf("sent %d, applied %d; want 4 sends of one batch", len(tr.sent), mod.applied)
	}
	for _, b := range tr.sent {
		if string(b) != "1" {
			t.Fatalf("retry sent %q, want the same batch \"1\"", b)
		}
	}
	if l.Scheduler().Failures() != 0 {
		t.Fatal("failures not reset")
	}
}

func TestLoopRunSyncsAtInterval(t *testing.T) {
	clk := &fakeClock{}
	mod := &fakeModule{pending: true}
	tr := &fakeTransport{}
	l, err := NewLoop(Options{Interval: 100 * time.Millisecond, Jitter: -1}, clk, tr, mod, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.OnError = func(err error) { t.Error(err) }
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
	// Let the loop run a while of virtual time, then stop it.
	for clk.Now() < int64(time.Second) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	if mod.applied != 1 || len(tr.sent) != 1 {
		t.Fatalf("applied %d, sent %d: want one batch (later checks find nothing)", mod.applied, len(tr.sent))
	}
}

func TestLoopBatchTooLarge(t *testing.T) {
	clk := &fakeClock{}
	mod := &fakeModule{pending: true}
	l, err := NewLoop(Options{MaxBatchBytes: 0}, clk, &fakeTransport{}, mod, 1)
	if err != nil {
		t.Fatal(err)
	}
	l.sched.opts.MaxBatchBytes = 0 // below any batch
	if err := l.SyncOnce(context.Background()); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("err %v, want ErrBatchTooLarge", err)
	}
	if l.Scheduler().Failures() != 1 {
		t.Fatal("oversized batch not counted as a failure")
	}
}

func TestNewLoopNeedsParts(t *testing.T) {
	if _, err := NewLoop(Options{}, nil, nil, nil, 0); err == nil {
		t.Fatal("nil parts accepted")
	}
}

// TestStepBackDelaysNoSync: the clock the scheduler runs on steps back
// (the host's offset to the coordinator's time moved) by a minute, after a
// good sync and during an outage: the next sync is still one interval (or
// one backoff) away, not a minute more. Before, the isolate made no sync
// for the length of the step.
func TestStepBackDelaysNoSync(t *testing.T) {
	const step = int64(time.Minute)
	s := newSched(t, Options{Interval: 100 * time.Millisecond, Jitter: -1})
	now := 1000 * ms
	s.Begin(now)
	s.Success(now)
	now += 10*ms - step
	if s.Due(now) { // the loop asks Due before it reads Next
		t.Fatal("due 10 ms after a sync")
	}
	if wait := s.Next() - now; wait <= 0 || wait > 100*ms {
		t.Fatalf("after a step back of a minute: next sync in %v, want within one interval", time.Duration(wait))
	}
	if !s.Due(now + 100*ms) {
		t.Fatal("not due one interval after the step")
	}
	if s.Stale(now + 100*ms) {
		t.Fatal("stale after a step back")
	}
	// During an outage: the backoff runs on, and probes still come.
	now += 100 * ms
	s.Begin(now)
	s.Failure(now)
	now += 30*ms - step
	if s.Due(now) {
		t.Fatal("due 30 ms into the backoff")
	}
	if wait := s.Next() - now; wait > 100*ms { // BackoffBase: the interval
		t.Fatalf("failing, after a step back: next attempt in %v, want within the backoff (100ms)", time.Duration(wait))
	}
	if !s.Probe(now + int64(DefaultProbeInterval)) {
		t.Fatal("no probe one probe interval after a step back")
	}
}

// The sync interval is one the module takes (wire.MinSyncInterval to
// wire.MaxSyncInterval): 1 ns was taken, and the loop spun on both cores;
// one past 30 s, an hourly quota's, was refused for a backoff base over
// its maximum, which the user never set (the maximum now follows it).
func TestOptionsSyncIntervalBounds(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		want     string // "" valid
	}{
		{time.Nanosecond, "the sync interval must be from 1ms to 1h0m0s, got 1ns"},
		{999 * time.Microsecond, "got 999µs"},
		{time.Millisecond, ""},
		{31 * time.Second, ""},
		{time.Hour, ""},
		{time.Hour + time.Second, "got 1h0m1s"},
	} {
		o := Options{Interval: tc.interval}
		o.EnsureDefaults()
		err := o.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v, want valid", tc.interval, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want an error with %q", tc.interval, err, tc.want)
		}
		if tc.want == "" && o.BackoffMax < o.BackoffBase {
			t.Errorf("%v: backoff max %v under its base %v", tc.interval, o.BackoffMax, o.BackoffBase)
		}
	}
}
