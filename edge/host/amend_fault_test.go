package host

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// faultSlot is a host of one isolate on a strict key of 100 per hour
// whose steps the test drives (no loop): its transport posts to url.
type faultSlot struct {
	t *testing.T
	s *slot
	m lockedModule
}

// faultCfg: a strict key of 100 per hour (a first request waits for a lease).
var faultCfg = wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
	{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: int64(time.Hour), Mode: wire.Strict}}}

func newFaultSlot(t *testing.T, url string) faultSlot {
	h, err := New(context.Background(), Options{Config: faultCfg, Isolates: 1, driven: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	s := h.slots[0]
	s.tr = &syncloop.HTTPTransport{URL: url, ID: "t", Client: &http.Client{Timeout: 5 * time.Second}}
	return faultSlot{t, s, lockedModule{s}}
}

// newFaultCoord starts a coordinator of newFaultSlot's limiter and a
// gatedProxy to it (held, fail: see newGatedProxy), and returns a host
// whose transport posts to the proxy.
func newFaultCoord(t *testing.T, held []int32, fail map[int32]bool) (faultSlot, *gatedProxy) {
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", faultCfg, nil)
	t.Cleanup(func() { k.stop(t) })
	p := newGatedProxy(t, k.addr, held, fail)
	return newFaultSlot(t, p.URL), p
}

// attempt holds a request (it needs a batch) and starts, on a sync loop of
// opts (the slot's own when attach), one attempt, which ends on done.
func (f faultSlot) attempt(opts syncloop.Options, attach bool) (*syncloop.Loop, <-chan error) {
	f.t.Helper()
	l, err := syncloop.NewLoop(opts, clock.Real, f.s.tr, f.m, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	if attach {
		f.s.loop = l
	}
	f.hold("a")
	done := make(chan error, 1)
	go func() { done <- l.SyncOnce(context.Background()) }()
	return l, done
}

// hold decides a request on key that waits for a lease (SyncRetry).
func (f faultSlot) hold(key string) {
	f.t.Helper()
	d, _, _, err := f.s.decide(context.Background(), []isolate.Check{{Limiter: 0, Key: key, Cost: 1}}, clock.Real.Now(), false)
	if err != nil || !d.SyncRetry {
		f.t.Fatalf("%s: %+v, %v; want SyncRetry", key, d, err)
	}
}

// cut cuts the isolate's batch, as the loop's attempt does.
func (f faultSlot) cut(what string) {
	f.t.Helper()
	if b, err := f.m.SyncOut(context.Background(), clock.Real.Now(), nil); err != nil || len(b) == 0 {
		f.t.Fatalf("%s: %d bytes, %v", what, len(b), err)
	}
}

// amend amends the batch in flight and waits for the amendment's answer.
func (f faultSlot) amend(what string) {
	f.t.Helper()
	if f.s.amend(clock.Real.Now()) == 0 {
		f.t.Fatalf("%s: no amendment", what)
	}
	f.s.stopAmends()
}

// coordProblem answers as the coordinator does, with a problem+json of type typ.
func coordProblem(w http.ResponseWriter, status int, typ string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	io.WriteString(w, `{"type":"urn:edgelimit:problem:`+typ+`","title":"`+typ+`"}`)
}

// A batch's attempt fails (a 503, a timeout) and its amendment's reply
// comes after: the module takes that reply as the batch's, so the batch
// is answered and the next one is a new cut, with its own tally of
// amendments. Before, the host took the reply as a second one: the next
// batch was not counted as a cut, its amendment joined the tally of the
// cut before, and when it and its amendment were both refused for their
// times, it was not taken back (resent as it was, refused until the
// coordinator's clock caught up). And the other way round: an amendment's
// reply answers the batch first, then the batch's attempt fails: that is
// no failed sync (the fail policies stayed on until the next sync).
func TestAmendmentAnswersTheBatchWhoseAttemptFailed(t *testing.T) {
	f, proxy := newFaultCoord(t, []int32{1}, nil) // batch 1's amendment, held
	s := f.s
	f.hold("a")
	f.cut("batch 1")
	f.hold("b")
	if s.amend(clock.Real.Now()) == 0 { // held at the gate
		t.Fatal("batch 1: no amendment")
	}
	s.attemptFailed(errors.New("503")) // batch 1's attempt fails before its amendment is answered
	if s.failures.Load() != 1 {
		t.Fatalf("failures %d after a failed attempt, want 1", s.failures.Load())
	}
	close(proxy.gate[1])
	s.stopAmends()
	if s.batches.Load() != 1 || s.unanswered {
		t.Fatalf("after the amendment's reply: batches answered %d, unanswered %v; want 1, false (the module took it as batch 1's)", s.batches.Load(), s.unanswered)
	}
	f.hold("c")
	f.cut("batch 2")
	if s.cuts.Load() != 2 {
		t.Fatalf("cuts %d after batch 2, want 2", s.cuts.Load())
	}
	// Batch 2's amendment answers first, then its attempt fails.
	f.hold("d")
	f.amend("batch 2")
	s.attemptFailed(errors.New("timeout"))
	if s.failures.Load() != 0 {
		t.Errorf("failures %d after batch 2 was answered by its amendment and its attempt then failed, want 0", s.failures.Load())
	}
	// Batch 3 and its amendment are both refused for their times: it is
	// taken back.
	f.hold("e")
	f.cut("batch 3")
	proxy.skew.Store(true)
	f.hold("g")
	f.amend("batch 3")
	if ok, err := f.m.Recall(context.Background(), clock.Real.Now()); err != nil || !ok {
		s.amendMu.Lock()
		tl := s.tally
		s.amendMu.Unlock()
		t.Fatalf("Recall of batch 3 (refused for its times, its one amendment too; tally %+v, cuts %d): %v, %v; want it taken back", tl, s.cuts.Load(), ok, err)
	}
}

// The coordinator refuses a batch and its amendment for their sequence
// number (409: it lost the isolate's state): the isolate reincarnates and
// sends the same deltas as batch 1 of a new id, the same cut. That batch
// and its one amendment are refused for their times: it is taken back.
// Before, the old incarnation's amendment stayed in the cut's tally, sent
// and not refused for its times, and the batch was resent as it was.
func TestReincarnationStartsTheAmendmentTallyAfresh(t *testing.T) {
	var answer atomic.Value
	answer.Store("seq_gap")
	coord := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		if typ := answer.Load().(string); typ == "seq_gap" {
			coordProblem(w, http.StatusConflict, typ)
		} else {
			coordProblem(w, http.StatusBadRequest, typ)
		}
	}))
	defer coord.Close()
	f := newFaultSlot(t, coord.URL)
	f.hold("a")
	f.cut("batch 1")
	f.hold("b")
	f.amend("batch 1") // refused for its sequence number, as the batch is
	if err := f.m.Reincarnate(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.cut("batch 1 of the new incarnation")
	answer.Store("clock_skew")
	f.hold("c")
	f.amend("the new incarnation's batch 1")
	if ok, err := f.m.Recall(context.Background(), clock.Real.Now()); err != nil || !ok {
		f.s.amendMu.Lock()
		tl := f.s.tally
		f.s.amendMu.Unlock()
		t.Fatalf("Recall of the new incarnation's batch 1 (refused for its times, its one amendment too; tally %+v): %v, %v; want it taken back", tl, ok, err)
	}
}

// A batch's own post fails (503) after its amendment's reply answered it:
// the sync loop takes the attempt as a good sync (syncloop.Answerer), so
// it does not back off (before: its scheduler counted a failure, held the
// next batch back for the backoff and took no early sync meanwhile).
func TestAnsweredAttemptIsNoFailureForTheLoop(t *testing.T) {
	f, proxy := newFaultCoord(t, []int32{1}, map[int32]bool{1: true}) // the batch: held, then 503
	s := f.s
	l, done := f.attempt(syncloop.Options{}, false)
	<-proxy.got[1]
	f.hold("b")
	f.amend("batch 1") // answered: the module takes its reply as batch 1's
	if s.batches.Load() != 1 {
		t.Fatalf("batches answered %d, want 1", s.batches.Load())
	}
	close(proxy.gate[1])
	if err := <-done; err != nil {
		t.Errorf("the attempt whose batch its amendment answered: %v; want a good sync", err)
	}
	if sc := l.Scheduler(); sc.Failures() != 0 || s.failures.Load() != 0 {
		t.Errorf("failures: the loop's %d, the slot's %d; want 0 and 0 (the batch was answered)", sc.Failures(), s.failures.Load())
	}
}

// gatedProxy forwards to the coordinator at addr, holding the i-th POST
// (from 1) until gate[i] is closed; got[i] is closed when it arrives. An
// i in fail answers 503 once released; every POST answers 400
// clock_skew while skew is set.
type gatedProxy struct {
	*httptest.Server
	n         atomic.Int32
	skew      atomic.Bool
	got, gate map[int32]chan struct{}
}

func newGatedProxy(t *testing.T, addr string, held []int32, fail map[int32]bool) *gatedProxy {
	p := &gatedProxy{got: map[int32]chan struct{}{}, gate: map[int32]chan struct{}{}}
	for _, i := range held {
		p.got[i], p.gate[i] = make(chan struct{}), make(chan struct{})
	}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		i := p.n.Add(1)
		if g, ok := p.gate[i]; ok {
			close(p.got[i])
			select {
			case <-g:
			case <-r.Context().Done():
				return
			}
		}
		if fail[i] {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		if p.skew.Load() {
			coordProblem(w, http.StatusBadRequest, "clock_skew")
			return
		}
		resp, err := http.Post("http://"+addr+r.URL.Path, r.Header.Get("Content-Type"), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(func() {
		for _, g := range p.gate {
			select {
			case <-g:
			default:
				close(g)
			}
		}
		p.Close()
	})
	return p
}

// The batch's attempt fails (503), then its amendment's reply answers the
// batch: the running loop stops backing off (Loop.Recovered), so the
// next batch, for a request held after, goes at once. Before, the loop
// kept its failure and its backoff (here an hour: one interval) and took
// no early sync until it ended; the simulator and the JavaScript package
// took the next batch at once.
func TestLateAmendmentReplyEndsTheLoopsBackoff(t *testing.T) {
	f, p := newFaultCoord(t, []int32{1, 2}, map[int32]bool{1: true}) // the batch (503) and its amendment
	s := f.s
	l, done := f.attempt(syncloop.Options{Interval: time.Hour, BackoffMax: time.Hour, MinSpacing: time.Millisecond}, true)
	<-p.got[1]
	f.hold("b")
	if s.amend(clock.Real.Now()) == 0 {
		t.Fatal("no amendment")
	}
	<-p.got[2]
	close(p.gate[1])
	err := <-done
	if err == nil {
		t.Fatal("the batch's 503: want a failed attempt")
	}
	s.attemptFailed(err)
	close(p.gate[2])
	s.stopAmends() // its reply answered batch 1
	if s.batches.Load() != 1 {
		t.Fatalf("batches answered %d, want 1", s.batches.Load())
	}
	f.hold("c") // needs batch 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	deadline := time.Now().Add(3 * time.Second)
	for p.n.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if p.n.Load() < 3 {
		t.Errorf("no batch 2 within 3 s after an amendment answered batch 1: the loop still backs off")
	}
}

// An amendment's reply answers the batch while the batch's own post is
// still on its way: the loop's attempt ends there (Loop.EndAttempt) as a
// good sync, without waiting for that post's reply (here held until the
// test ends; a lost one would hold the next batch back for the transport's
// timeout).
func TestAmendmentReplyEndsTheLoopsAttempt(t *testing.T) {
	f, p := newFaultCoord(t, []int32{1}, nil) // the batch, held
	s := f.s
	l, done := f.attempt(syncloop.Options{Interval: time.Hour, BackoffMax: time.Hour}, true)
	<-p.got[1]
	f.hold("b")
	f.amend("batch 1") // answered
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the attempt its amendment answered: %v; want a good sync", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the loop's attempt still waits for its own reply 3 s after its amendment answered the batch")
	}
	if l.Scheduler().Failures() != 0 || s.failures.Load() != 0 {
		t.Errorf("failures: the loop's %d, the slot's %d; want 0 and 0", l.Scheduler().Failures(), s.failures.Load())
	}
}
