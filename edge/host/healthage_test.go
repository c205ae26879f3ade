package host

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The coordinator's age in /healthz is on one clock: a host whose own
// clock is off (it runs on the coordinator's time, learned from the
// replies) reads it as the age of its last reply, as each isolate's last
// sync age says. Before, the probe's time (on the coordinator's time) was
// compared with the last reply's (on the host's own clock): 2 s ahead it
// read -1,900 ms, and 2 s behind the replies looked 2 s old, so every
// health check probed the coordinator while syncs flowed.
func TestHealthAgeOnOneClock(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 1000, Period: int64(time.Second), Mode: wire.Strict}}}
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", cfg, nil)
	defer k.stop(t)
	for _, off := range []time.Duration{2 * time.Second, -2 * time.Second} {
		s := serve(t, Options{Config: cfg, Isolates: 1, Coordinator: "http://" + k.addr,
			Sync: syncloop.Options{Interval: 100 * time.Millisecond}, Clock: fastClock{int64(off)}})
		for i := 0; i < 10; i++ {
			resp, err := http.Get(s.url + "/v1/decide?" + url.Values{"limiter": {"s"}, "key": {"k"}}.Encode())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			time.Sleep(30 * time.Millisecond)
		}
		hl := s.h.Health(s.h.opts.Clock.Now())
		last := int64(-1)
		for _, ih := range hl.Isolates {
			if ih.LastSyncAgeMS >= 0 && (last < 0 || ih.LastSyncAgeMS < last) {
				last = ih.LastSyncAgeMS
			}
		}
		if last < 0 || hl.CoordinatorAgeMS < 0 || hl.CoordinatorAgeMS > last+5 {
			t.Errorf("host clock %v: coordinator_age_ms %d, last sync %d ms ago: want the age of the last reply", off, hl.CoordinatorAgeMS, last)
		}
	}
}
