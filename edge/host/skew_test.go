package host

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// fastClock is the real clock running ahead by ns.
type fastClock struct{ ns int64 }

func (c fastClock) Now() int64                    { return clock.Real.Now() + c.ns }
func (c fastClock) After(d int64) <-chan struct{} { return clock.Real.After(d) }

// TestFastClockChangesNothingForOthers: two hosts of one isolate share a
// key of 6 a second (approximate) through a real coordinator; one host's
// clock runs 2 s fast, and it keeps it (OwnClock: a host runs on the
// coordinator's time otherwise, TestSkewedHostRunsOnCoordinatorsTime). The coordinator refuses its windows ahead (400
// clock_skew: the host reports failing syncs) instead of letting them
// move the key forward and drop the honest host's counts: the honest host
// never admits more than 6 in a window of its own (fewer once the fast
// host's refused batches are accepted late: its admissions count too).
// With the rule before (any window up to (now+10s)/period+1) the honest
// host admitted 35 and 38 in a window.
func TestFastClockChangesNothingForOthers(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "fw", Algorithm: wire.FixedWindow, Limit: 6, Period: int64(time.Second)}}}
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", cfg, nil)
	defer k.stop(t)
	sync := syncloop.Options{Interval: 20 * time.Millisecond}
	honest := serve(t, Options{Config: cfg, Isolates: 1, Coordinator: "http://" + k.addr, Sync: sync})
	fast := serve(t, Options{Config: cfg, Isolates: 1, Coordinator: "http://" + k.addr, Sync: sync,
		Clock: fastClock{int64(2 * time.Second)}, OwnClock: true})
	q := url.Values{"limiter": {"fw"}, "key": {"k"}}
	perWindow := map[int64]int{}
	end := time.Now().Add(3500 * time.Millisecond)
	for time.Now().Before(end) {
		fast.decide(t, q)
		code, _, _ := honest.decide(t, q)
		if code == http.StatusOK {
			perWindow[time.Now().UnixNano()/int64(time.Second)]++
		}
		time.Sleep(25 * time.Millisecond)
	}
	if len(perWindow) < 2 {
		t.Fatalf("the honest host admitted in %d windows: %v", len(perWindow), perWindow)
	}
	for w, n := range perWindow {
		if n > 6 {
			t.Errorf("window %d: the honest host admitted %d, over the limit of 6 (%v)", w, n, perWindow)
		}
	}
	// The fast host's batches that hold only an older window are
	// accepted between refusals, so its health flips: it must be 503 at
	// some point while it keeps deciding.
	code, hl := fast.health(t)
	for end := time.Now().Add(2 * time.Second); code != http.StatusServiceUnavailable && time.Now().Before(end); {
		fast.decide(t, q)
		time.Sleep(20 * time.Millisecond)
		code, hl = fast.health(t)
	}
	if code != http.StatusServiceUnavailable || fast.h.SyncErrors() == 0 {
		t.Errorf("the fast host's syncs were not refused: %d %+v", code, hl)
	}
	t.Logf("honest host per window: %v; fast host's sync errors: %d", perWindow, fast.h.SyncErrors())
}
