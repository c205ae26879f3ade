package host

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Real processes' code end to end: host A fills a strict key of 5 per 10
// minutes through a real coordinator; host B, which never asked for that
// key, syncs for another and hears with that reply that the key's window
// is full (the coordinator's full-window notice): its requests for the
// key are denied at once, without a sync (counted at a proxy in front of
// the coordinator) and without being held.
func TestFullWindowNoticeDeniesWithoutSync(t *testing.T) {
	// A notice starts a dry spell of at least a hundredth of the period
	// (wasm/core/sync.go), after which a denial asks again: with a minute,
	// 600 ms, which a loaded machine once let pass between b's last reply
	// and its denials (b synced once); with 10 minutes, 6 s.
	const period = 10 * time.Minute
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "q", Algorithm: wire.FixedWindow, Limit: 5, Period: int64(period), Mode: wire.Strict}}}
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", cfg, nil)
	defer k.stop(t)
	// Syncs that ask for the full key (an entry with demand, an ask): a
	// denial decided from the notice asks for nothing. (Cached denials do
	// ask for a heartbeat, an empty batch that hears of a reset: a loaded
	// CI, whose denials came a few hundred ms after b's last reply, saw
	// one.)
	var syncs atomic.Int64
	target, _ := url.Parse("http://" + k.addr)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sync" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var b wire.Batch
			if b.UnmarshalMsg(body) == nil && asksFor(&b, "q", "full") {
				syncs.Add(1)
			}
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	// Long sync intervals: only requests make these hosts sync.
	sync := syncloop.Options{Interval: 10 * time.Second, MinSpacing: 10 * time.Millisecond}
	a := serve(t, Options{Config: cfg, Isolates: 1, Coordinator: "http://" + k.addr, Sync: sync})
	b := serve(t, Options{Config: cfg, Isolates: 1, Coordinator: proxy.URL, Sync: sync})
	full := url.Values{"limiter": {"q"}, "key": {"full"}}
	// All in one window: near its end, wait for the next (CI once ran it
	// in the last second, and b's denial rightly said to retry in 584 ms,
	// when the window ended).
	if left := period - time.Duration(time.Now().UnixNano()%int64(period)); left < 10*time.Second {
		time.Sleep(left + 50*time.Millisecond)
	}
	for i := 0; i < 5; i++ {
		if code, d, _ := a.decide(t, full); code != http.StatusOK {
			t.Fatalf("a's request %d: %d %+v", i, code, d)
		}
	}
	if code, _, _ := a.decide(t, full); code != http.StatusTooManyRequests {
		t.Fatalf("a's sixth request: %d, want 429", code)
	}
	// a reports lazily: its next batch (asking for another key) reports
	// the 5 it admitted, and the key's count reaches its limit.
	a.decide(t, url.Values{"limiter": {"q"}, "key": {"a-other"}})
	if code, _, _ := b.decide(t, url.Values{"limiter": {"q"}, "key": {"b-other"}}); code != http.StatusOK {
		t.Fatalf("b's request for another key: %d", code)
	}
	// b's syncs of its own after that request (an early one, its lease of
	// the other key half spent) are not the denials': they settle first
	// (a loaded CI once counted one that left after the request returned).
	before := syncs.Load()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		time.Sleep(200 * time.Millisecond)
		if n := syncs.Load(); n != before {
			before = n
			continue
		}
		break
	}
	for i := 0; i < 3; i++ {
		code, d, _ := b.decide(t, full)
		if code != http.StatusTooManyRequests || d.RetryAfter < int64(time.Second) {
			t.Fatalf("b's request %d for the full key: %d %+v; want 429 until the window ends", i, code, d)
		}
	}
	if n := syncs.Load() - before; n != 0 {
		t.Fatalf("b asked %d times for the full key to deny it; want 0 (it was told with its last reply)", n)
	}
}

// asksFor reports whether batch b asks for budget of (limiter, key): an
// entry with demand, or an amendment's ask.
func asksFor(b *wire.Batch, limiter, key string) bool {
	for _, e := range b.Entries {
		if e.Limiter == limiter && e.Key == key && e.Demand > 0 {
			return true
		}
	}
	for _, a := range b.Asks {
		if a.Limiter == limiter && a.Key == key {
			return true
		}
	}
	return false
}
