package coordinator_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A strict limit lowered below the count, with the Go edge host (2
// isolates) over loopback: the edges admit at most what their leases held
// when the limit dropped, then deny with the new limit, and the window's
// count ends at most at the count plus those leases (the count lags what
// the edges admitted: fixed windows report lazily, under their lease).
func TestLimitLoweredWithEdges(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: int64(time.Hour), Mode: wire.Strict}}}
	c, err := coordinator.Open(coordinator.Options{InMemory: true, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	curl := serveLoopback(t, c)
	_, hurl := serveEdge(t, host.Options{Config: cfg, Isolates: 2, Coordinator: curl, IDPrefix: "lower",
		Sync: syncloop.Options{Interval: 50 * time.Millisecond}})
	decide := func(n int) (admitted int) {
		for range n {
			resp, err := http.Get(hurl + "/v1/decide?limiter=s&key=k")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == 200 {
				admitted++
			}
			time.Sleep(2 * time.Millisecond)
		}
		return admitted
	}
	ctx := context.Background()
	if a := decide(60); a < 50 {
		t.Fatalf("%d of 60 admitted under a limit of 100", a)
	}
	time.Sleep(300 * time.Millisecond) // every isolate synced what it admitted
	before, err := c.KeyState(ctx, "s", "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetLimit(ctx, "test", "s", "", 20, "lowered below the count"); err != nil {
		t.Fatal(err)
	}
	after := decide(100)
	time.Sleep(300 * time.Millisecond)
	end, err := c.KeyState(ctx, "s", "k")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("limit 100 -> 20 at count %d with leases %d: %d admitted after, count %d at the end", before.Count, before.LeaseSum, after, end.Count)
	if int64(after) > before.LeaseSum || end.Count > before.Count+before.LeaseSum {
		t.Fatalf("after the limit dropped: %d admitted, count %d; want at most the leases held (%d) over the count (%d)",
			after, end.Count, before.LeaseSum, before.Count)
	}
	// What is still reserved is what is left of those leases (a lease
	// also covers cost admitted and not yet reported): nothing new.
	if end.Limit != 20 || end.LeaseSum > before.LeaseSum {
		t.Fatalf("key state at the end: %+v, want limit 20 and no more reserved than the %d leased before", end, before.LeaseSum)
	}
	resp, err := http.Get(hurl + "/v1/decide?limiter=s&key=k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := resp.Header.Get("RateLimit-Policy"); resp.StatusCode != 429 || !strings.Contains(h, "q=20") {
		t.Fatalf("the edge answers %d with RateLimit-Policy %q, want 429 and the new limit 20", resp.StatusCode, h)
	}
}
