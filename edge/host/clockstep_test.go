package host

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestCoordinatorClockStepBackStopsNoIsolate: the coordinator's clock
// reads a minute ahead for 2 s, then right again (a clock stepped and
// corrected, or a failover between coordinators whose clocks disagree;
// a 24 h window, so that no window ends in between).
// The host follows the coordinator's time both ways (clock.Offset, shared
// by its isolates), and every isolate keeps syncing: within a second of
// the step back each has synced and the coordinator counts every unit the
// host admitted. Before, the isolates' schedulers kept the times read a
// minute ahead, and 3 of 4 made no sync for the minute (their counts
// unsent, the host's /healthz 503).
func TestCoordinatorClockStepBackStopsNoIsolate(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 1 << 30, Period: int64(24 * time.Hour), Mode: wire.Approximate}}}
	var ahead atomic.Bool // the coordinator's clock reads a minute ahead
	k := startCoordOpts(t, "127.0.0.1:0", coordinator.Options{Dir: t.TempDir(), Config: cfg, GCInterval: -1,
		Clock: clock.Func(func() int64 {
			if ahead.Load() {
				return clock.Real.Now() + int64(time.Minute)
			}
			return clock.Real.Now()
		})})
	defer k.stop(t)
	h := serve(t, Options{Config: cfg, Isolates: 4, Coordinator: "http://" + k.addr, Sync: syncloop.Options{Interval: 100 * time.Millisecond}})
	admitted := 0
	run := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			resp, err := http.Get(h.url + "/v1/decide?limiter=a&key=k")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				admitted++
			}
		}
	}
	run(time.Second)
	ahead.Store(true)
	run(2 * time.Second)
	ahead.Store(false)
	run(time.Second)
	_, hl := h.health(t)
	for _, ih := range hl.Isolates {
		if ih.LastSyncAgeMS < 0 || ih.LastSyncAgeMS > 1000 {
			t.Errorf("isolate %s: last sync %d ms ago a second after the step back, want within a second", ih.ID, ih.LastSyncAgeMS)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for k.count(t, "a", "k") != int64(admitted) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := k.count(t, "a", "k"); got != int64(admitted) {
		t.Errorf("the coordinator counts %d of the %d admitted, 2 s after the step back", got, admitted)
	}
	t.Logf("%d admitted, %d counted; clock offset now %d ms", admitted, k.count(t, "a", "k"), hl.ClockOffsetMS)
}
