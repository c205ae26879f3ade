package host

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

func waitConfig(limit int64, period time.Duration) wire.Config {
	return wire.Config{Limiters: []wire.LimiterConfig{{Name: "llm", Algorithm: wire.FixedWindow, Limit: limit, Period: int64(period)}}}
}

// startOfWindow sleeps until just after the next boundary of fixed windows
// of period, so that a test's requests fall in one window.
func startOfWindow(period time.Duration) {
	now := time.Now().UnixNano()
	time.Sleep(time.Duration(int64(period)-now%int64(period)) + 5*time.Millisecond)
}

// waitReq sends GET /v1/wait with q and returns the status, decision and headers.
func (s served) waitReq(t *testing.T, q url.Values) (int, decisionJSON, http.Header) {
	t.Helper()
	resp, err := http.Get(s.url + "/v1/wait?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d decisionJSON
	json.NewDecoder(resp.Body).Decode(&d)
	return resp.StatusCode, d, resp.Header
}

func TestWaitAdmitsOnceTheWindowTurns(t *testing.T) {
	s := serve(t, Options{Config: waitConfig(2, 300*time.Millisecond), Isolates: 1})
	q := url.Values{"limiter": {"llm"}, "key": {"k"}}
	startOfWindow(300 * time.Millisecond)
	for i := 0; i < 2; i++ {
		if st, _, _ := s.decide(t, q); st != http.StatusOK {
			t.Fatalf("decision %d: %d", i, st)
		}
	}
	st, denied, _ := s.decide(t, q)
	if st != http.StatusTooManyRequests {
		t.Fatalf("third decision: %d, want 429", st)
	}
	q.Set("max_wait", "2s")
	st, d, hd := s.waitReq(t, q)
	if st != http.StatusOK || !d.Allowed {
		t.Fatalf("wait: %d %+v, want 200 allowed", st, d)
	}
	if now := time.Now().UnixNano(); now < denied.Reset {
		t.Fatalf("admitted at %d, before the denied window ended at %d", now, denied.Reset)
	}
	if hd.Get("EdgeLimit-Waited") == "" || hd.Get("RateLimit-Policy") != `"llm";q=2;w=1` {
		t.Fatalf("headers: %v", hd)
	}
}

func TestWaitGivesUpAtOnceWhenNoSlotFitsMaxWait(t *testing.T) {
	s := serve(t, Options{Config: waitConfig(1, 720*time.Hour), Isolates: 1})
	q := url.Values{"limiter": {"llm"}, "key": {"k"}}
	s.decide(t, q)
	q.Set("max_wait", "9s")
	st, d, hd := s.waitReq(t, q)
	if st != http.StatusTooManyRequests || d.Allowed {
		t.Fatalf("wait: %d %+v, want 429", st, d)
	}
	if hd.Get("EdgeLimit-Waited") != "0" || hd.Get("Retry-After") == "" {
		t.Fatalf("a slot up to 30 days away is refused without waiting, with Retry-After: %v", hd)
	}
	// A cost above the limit can never pass: 429 at once, no Retry-After.
	q.Set("cost", "2")
	st, d, hd = s.waitReq(t, q)
	if st != http.StatusTooManyRequests || d.RetryAfter != -1 || hd.Get("Retry-After") != "" {
		t.Fatalf("impossible cost: %d %+v %v", st, d, hd)
	}
}

func TestWaitRefusesBadMaxWait(t *testing.T) {
	s := serve(t, Options{Config: waitConfig(1, time.Second), Isolates: 1})
	for _, mw := range []string{"soon", "-1s", "10s"} { // 10s: not below the 10s write timeout
		st, _, _ := s.waitReq(t, url.Values{"limiter": {"llm"}, "key": {"k"}, "max_wait": {mw}})
		if st != http.StatusBadRequest {
			t.Errorf("max_wait=%s: %d, want 400", mw, st)
		}
	}
	if st, _, _ := s.waitReq(t, url.Values{"limiter": {"nope"}, "key": {"k"}}); st != http.StatusBadRequest {
		t.Errorf("unknown limiter: %d, want 400", st)
	}
}

func TestWaitStopsWhenTheClientGoesAway(t *testing.T) {
	h, err := New(context.Background(), Options{Config: waitConfig(1, 4*time.Second), Isolates: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	returned := make(chan struct{}, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Handler().ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	defer srv.Close()
	u := srv.URL + "/v1/wait?limiter=llm&key=k&max_wait=9s"
	startOfWindow(4 * time.Second) // up to 4 s; the window then lasts 4 s
	resp, err := http.Get(u)       // takes the only slot of the window
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first: %v %v", resp, err)
	}
	resp.Body.Close()
	<-returned
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the second request should still be waiting when the client gives up: %v", err)
	}
	select {
	case <-returned: // the handler stopped waiting
	case <-time.After(2 * time.Second):
		t.Fatal("the handler still waits for a client that went away (the window ends in about 3.8 s)")
	}
}
