package host

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestStopAnswersWaitsAndClosesNewConnections: a graceful stop of the
// server (SIGTERM: Serve's Shutdown) answers a /v1/wait with its last
// decision at once, and closes a connection that has not sent a request,
// so that the stop is not held up by either. The host's clock is manual
// and never advanced: the wait, on a key denied with a Retry-After of a
// second, could only end by the stop (before, Shutdown ran out of its
// 5 s here, as the wait slept to its max_wait; and net/http waits for a
// connection without a request until it is 5 s old).
func TestStopAnswersWaitsAndClosesNewConnections(t *testing.T) {
	clk := clock.NewManual(1_763_700_000e9 + 100e6)
	h, err := New(context.Background(), Options{Isolates: 1, Clock: clk, Config: wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 1, Period: int64(time.Second), Mode: wire.Approximate}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := h.Server()
	go srv.Serve(ln)
	base := "http://" + ln.Addr().String()
	if resp, err := http.Post(base+"/v1/decide?limiter=api&key=k", "", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first request: %v %v", resp, err)
	}
	type answer struct {
		status int
		body   string
	}
	waited := make(chan answer, 1)
	var waiting atomic.Bool
	go func() {
		waiting.Store(true)
		resp, err := http.Post(base+"/v1/wait?limiter=api&key=k&max_wait=8s", "", nil)
		if err != nil {
			waited <- answer{0, err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		waited <- answer{resp.StatusCode, string(b)}
	}()
	fresh, err := net.Dial("tcp", ln.Addr().String()) // sends nothing
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	// The wait has made its first decision (a denial): it sleeps on the
	// manual clock, or is about to.
	denied := func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(b), `edgelimit_edge_decisions_total{limiter="api",result="denied"} 1`)
	}
	for deadline := time.Now().Add(10 * time.Second); !waiting.Load() || !denied(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the wait made no decision")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v (held by the wait or the connection without a request)", err)
	}
	a := <-waited
	if a.status != http.StatusTooManyRequests || !strings.Contains(a.body, `"allowed":false`) {
		t.Fatalf("the wait at the stop: %d %s, want its last decision, 429", a.status, a.body)
	}
	_ = fresh.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := fresh.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the connection without a request: read %v, want EOF (closed by the stop)", err)
	}
}
