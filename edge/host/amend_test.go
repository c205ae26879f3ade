package host

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// slowLink forwards syncs to a coordinator after delay, and records what
// it forwarded.
type slowLink struct {
	to    string
	delay time.Duration
	back  func(b wire.Batch) time.Duration // extra delay of b's reply (nil: none)
	mu    sync.Mutex
	seen  []wire.Batch
	at    []time.Time // when each of seen came
}

func (l *slowLink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var b wire.Batch
	if err := b.UnmarshalMsg(body); err == nil {
		l.mu.Lock()
		l.seen, l.at = append(l.seen, b), append(l.at, time.Now())
		l.mu.Unlock()
	}
	time.Sleep(l.delay)
	resp, err := http.Post(l.to+r.URL.Path, r.Header.Get("Content-Type"), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if l.back != nil {
		time.Sleep(l.back(b))
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (l *slowLink) batches() []wire.Batch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]wire.Batch(nil), l.seen...)
}

// heldDuringBatch starts a coordinator of one strict limiter (100 per
// hour) behind link (its to is set here) and an edge host of one isolate
// syncing every interval through it. A request of the first key is held
// and sends batch 1; 20 ms after the link forwarded it, a request of the
// next key (no lease either) is held too, and so on: each next key 20 ms
// after the link forwarded what the one before sent. All must be
// admitted. It returns the coordinator and when each was decided.
func heldDuringBatch(t *testing.T, link *slowLink, interval time.Duration, keys ...string) (k *coord, at []time.Time) {
	t.Helper()
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: int64(time.Hour), Mode: wire.Strict}}}
	k = startCoord(t, t.TempDir(), "127.0.0.1:0", cfg, nil)
	t.Cleanup(func() { k.stop(t) })
	link.to = "http://" + k.addr
	srv := httptest.NewServer(link)
	t.Cleanup(srv.Close)
	h, err := New(context.Background(), Options{Config: cfg, Isolates: 1, Coordinator: srv.URL,
		Sync: syncloop.Options{Interval: interval}, RetryWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ds, at := make([]Decision, len(keys)), make([]time.Time, len(keys))
	var wg sync.WaitGroup
	for i, key := range keys {
		if i > 0 {
			deadline := time.Now().Add(5 * time.Second)
			for len(link.batches()) < i && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := h.Decide(context.Background(), []isolate.Check{{Limiter: 0, Key: key, Cost: 1}}, clock.Real.Now)
			if err != nil {
				t.Error(err)
			}
			ds[i], at[i] = d, time.Now()
		}()
	}
	wg.Wait()
	for i, d := range ds {
		if !d.Allowed {
			t.Fatalf("%s: %+v, want admitted", keys[i], d)
		}
	}
	return k, at
}

// TestHeldRequestAmendsTheBatchInFlight: a strict request held while a
// batch is on its way is asked for by an amendment of that batch, sent at
// once, and admitted on its reply: no second batch is cut for it (over a
// real coordinator on loopback, behind a slow link).
func TestHeldRequestAmendsTheBatchInFlight(t *testing.T) {
	link := &slowLink{delay: 300 * time.Millisecond} // b comes while a's batch is on its way
	k, _ := heldDuringBatch(t, link, 10*time.Second, "a", "b")
	seen := link.batches()
	if len(seen) != 2 || seen[0].Seq != 1 || seen[1].Seq != 1 || len(seen[1].Asks) != 1 || seen[1].Asks[0].Key != "b" {
		t.Fatalf("the link forwarded %+v; want batch 1 and its amendment asking for b", seen)
	}
	if got := k.count(t, "s", "a") + k.count(t, "s", "b"); got > 2 {
		t.Fatalf("counted %d, want at most the 2 admitted", got)
	}
}

// TestAmendmentReplyAfterTheNextBatch: the loop cuts the next batch while
// an amendment is on its way, and the amendment's reply, coming after that
// cut, still admits the request it asked for, before the next batch's
// reply (over a real coordinator on loopback, behind a slow link).
func TestAmendmentReplyAfterTheNextBatch(t *testing.T) {
	// 100 ms each way there; the amendment's reply 400 ms more, batch
	// 2's 800 ms more.
	link := &slowLink{delay: 100 * time.Millisecond, back: func(b wire.Batch) time.Duration {
		switch {
		case b.Seq >= 2:
			return 800 * time.Millisecond
		case len(b.Asks) > 0:
			return 400 * time.Millisecond
		}
		return 0
	}}
	k, at2 := heldDuringBatch(t, link, 200*time.Millisecond, "a", "b")
	bAt := at2[1]
	link.mu.Lock()
	seen, at := append([]wire.Batch(nil), link.seen...), append([]time.Time(nil), link.at...)
	link.mu.Unlock()
	if len(seen) < 3 || seen[0].Seq != 1 || len(seen[0].Asks) != 0 || seen[1].Seq != 1 || len(seen[1].Asks) != 1 ||
		seen[1].Asks[0].Key != "b" || seen[2].Seq != 2 || !at[2].Before(bAt) {
		t.Fatalf("the link forwarded %+v; want batch 1, its amendment asking for b, and batch 2 before b was decided", seen)
	}
	// Batch 2's reply comes 100+800 ms after it was sent: b was admitted
	// on the amendment's (about 500 ms after it was sent).
	if earliest := at[2].Add(900 * time.Millisecond); !bAt.Before(earliest.Add(-200 * time.Millisecond)) {
		t.Fatalf("b admitted %v after batch 2 was sent; want on the amendment's reply, well before batch 2's (%v)",
			bAt.Sub(at[2]), earliest.Sub(at[2]))
	}
	if got := k.count(t, "s", "a") + k.count(t, "s", "b"); got > 2 {
		t.Fatalf("counted %d, want at most the 2 admitted", got)
	}
}

// TestSecondHeldRequestAmendsAgain: a request held while the batch's
// amendment is on its way asks in a second amendment of the batch, sent at
// once (syncloop.NextAsk), not in the next batch after both replies: no
// second batch is cut for it (over a real coordinator on loopback, behind
// a slow link).
func TestSecondHeldRequestAmendsAgain(t *testing.T) {
	link := &slowLink{delay: 300 * time.Millisecond} // b and c come while a's batch is on its way
	k, _ := heldDuringBatch(t, link, 10*time.Second, "a", "b", "c")
	seen := link.batches()
	if len(seen) != 3 || seen[0].Seq != 1 || seen[1].Seq != 1 || len(seen[1].Asks) != 1 || seen[1].Asks[0].Key != "b" ||
		seen[2].Seq != 1 || len(seen[2].Asks) != 1 || seen[2].Asks[0].Key != "c" {
		t.Fatalf("the link forwarded %+v; want batch 1 and two amendments of it, asking for b and for c", seen)
	}
	if got := k.count(t, "s", "a") + k.count(t, "s", "b") + k.count(t, "s", "c"); got > 3 {
		t.Fatalf("counted %d, want at most the 3 admitted", got)
	}
}

// A batch sent again after an attempt without a reply (the loop resends
// the module's outstanding batch) is no new cut: it asks for nothing a
// request held since it was cut needs, so such a request must still ask
// (slot.cuts, which ask compares with the count at its decision).
func TestResendIsNoNewCut(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: int64(time.Hour), Mode: wire.Strict}}}
	h, err := New(context.Background(), Options{Config: cfg, Isolates: 1, driven: true}) // no loop: the test drives the module
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	s, m := h.slots[0], lockedModule{h.slots[0]}
	now := clock.Real.Now()
	d, _, held, err := s.decide(context.Background(), []isolate.Check{{Limiter: 0, Key: "a", Cost: 1}}, now, false)
	if err != nil || !d.SyncRetry {
		t.Fatalf("a strict key without a lease: %+v, %v; want SyncRetry", d, err)
	}
	first, err := m.SyncOut(context.Background(), now, nil)
	if err != nil || len(first) == 0 {
		t.Fatalf("the first SyncOut: %d bytes, %v; want the batch asking for a", len(first), err)
	}
	again, err := m.SyncOut(context.Background(), now+int64(100*time.Millisecond), nil)
	if err != nil || !bytes.Equal(again, first) {
		t.Fatalf("the SyncOut after an attempt without a reply: %d bytes, %v; want the same batch again", len(again), err)
	}
	if got := s.cuts.Load(); got != held+1 {
		t.Fatalf("%d batches cut since the decision after a cut and its resend, want 1", got-held)
	}
}
