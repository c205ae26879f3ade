package host

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// An edge whose coordinator was down while requests came, and that gets
// none after it returns (an orchestrator drains an edge whose health check
// fails), recovers on its health checks: each probes past the backoff, and
// the backoff itself is never longer than the outage has lasted. Before,
// the requests' probes during a 2 s outage pushed every isolate's next
// attempt to the 30 s cap, and /healthz said 503 that long, the cost
// admitted meanwhile unsent.
func TestHealthChecksRecoverAnIdleEdge(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100000, Period: int64(time.Hour), Mode: wire.Strict, FailPolicy: "open"}}}
	addr := deadAddr(t)
	h, err := New(context.Background(), Options{Config: cfg, Isolates: 2, Coordinator: "http://" + addr,
		Sync: syncloop.Options{Interval: 50 * time.Millisecond, StaleAfter: 150 * time.Millisecond}, RetryWait: 100 * time.Millisecond,
		SyncTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	admitted := 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		d, err := h.Decide(context.Background(), []isolate.Check{{Limiter: 0, Key: "k", Cost: 1}}, clock.Real.Now)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted == 0 {
		t.Fatal("nothing admitted while the coordinator was down (the policy is open)")
	}
	k := startCoord(t, t.TempDir(), addr, cfg, nil)
	defer k.stop(t)
	back := time.Now()
	for h.CheckHealth(context.Background()).Status != "ok" {
		if time.Since(back) > 5*time.Second {
			t.Fatalf("/healthz not ok %v after the coordinator came back", time.Since(back))
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("healthy %v after the coordinator came back", time.Since(back).Round(time.Millisecond))
	for deadline := time.Now().Add(5 * time.Second); k.count(t, "s", "k") != int64(admitted); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator counted %d of the %d admitted during the outage", k.count(t, "s", "k"), admitted)
		}
	}
}

// Health checks that come together while the coordinator hangs (SIGSTOP,
// a black hole) share one failed probe: each waiting check takes the
// answer of the probe that failed while it waited. Before, only a probe
// that succeeded was remembered, so six checks at once made six probes of
// a second each, one after the other (the last answered after 6 s, past
// most load balancers' timeouts, and a SIGTERM waited for them).
func TestConcurrentHealthChecksShareAFailedProbe(t *testing.T) {
	addr, accepted := hangingAddr(t)
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 100, Period: int64(time.Second)}}}
	h, err := New(context.Background(), Options{Config: cfg, Isolates: 1, Coordinator: "http://" + addr,
		SyncTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	before := accepted.Load() // the reading of the coordinator's time at start
	var wg sync.WaitGroup
	results := make([]Health, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = h.CheckHealth(context.Background())
		}()
	}
	wg.Wait()
	for i, hl := range results {
		if hl.Status != "unreachable" || hl.ProbeError == "" {
			t.Errorf("check %d: %q (%s), want unreachable", i, hl.Status, hl.ProbeError)
		}
	}
	// One probe, or two when a check came after the first had failed.
	if n := accepted.Load() - before; n < 1 || n > 2 {
		t.Errorf("%d probes for 6 checks at once, want 1 or 2", n)
	}
}
