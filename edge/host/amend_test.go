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
	mu    sync.Mutex
	seen  []wire.Batch
}

func (l *slowLink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var b wire.Batch
	if err := b.UnmarshalMsg(body); err == nil {
		l.mu.Lock()
		l.seen = append(l.seen, b)
		l.mu.Unlock()
	}
	time.Sleep(l.delay)
	resp, err := http.Post(l.to+r.URL.Path, r.Header.Get("Content-Type"), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (l *slowLink) batches() []wire.Batch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]wire.Batch(nil), l.seen...)
}

// TestHeldRequestAmendsTheBatchInFlight: a strict request held while a
// batch is on its way is asked for by an amendment of that batch, sent at
// once, and admitted on its reply: no second batch is cut for it (over a
// real coordinator on loopback, behind a slow link).
func TestHeldRequestAmendsTheBatchInFlight(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: int64(time.Hour), Mode: wire.Strict}}}
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", cfg, nil)
	defer k.stop(t)
	link := &slowLink{to: "http://" + k.addr, delay: 300 * time.Millisecond}
	srv := httptest.NewServer(link)
	defer srv.Close()
	h, err := New(context.Background(), Options{Config: cfg, Isolates: 1, Coordinator: srv.URL,
		Sync: syncloop.Options{Interval: 10 * time.Second}, RetryWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	now := func() int64 { return clock.Real.Now() }
	decide := func(key string, out *Decision) {
		d, err := h.Decide(context.Background(), []isolate.Check{{Limiter: 0, Key: key, Cost: 1}}, now)
		if err != nil {
			t.Error(err)
		}
		*out = d
	}
	var a, b Decision
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); decide("a", &a) }()
	// b comes while a's batch is on its way (the link holds it 300 ms).
	deadline := time.Now().Add(5 * time.Second)
	for len(link.batches()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	go func() { defer wg.Done(); decide("b", &b) }()
	wg.Wait()
	if !a.Allowed || !b.Allowed {
		t.Fatalf("a %+v, b %+v: want both admitted", a, b)
	}
	seen := link.batches()
	if len(seen) != 2 || seen[0].Seq != 1 || seen[1].Seq != 1 || len(seen[1].Asks) != 1 || seen[1].Asks[0].Key != "b" {
		t.Fatalf("the link forwarded %+v; want batch 1 and its amendment asking for b", seen)
	}
	if got := k.count(t, "s", "a") + k.count(t, "s", "b"); got > 2 {
		t.Fatalf("counted %d, want at most the 2 admitted", got)
	}
}
