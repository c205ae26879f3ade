package host

import (
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestSkewedHostRunsOnCoordinatorsTime: a host whose clock is off by
// seconds (ahead past the coordinator's allowed skew of 2 s, ahead within
// it, and behind) shares a strict key of 10 a second (fail policy closed)
// with an honest host through a real coordinator (Pebble on disk). The
// skewed host decides on the coordinator's time, learned from its replies:
//   - alone and under the limit (about one request per 250 ms, off the
//     windows' edges), it admits every request after its first sync;
//   - its answers name the coordinator's window (reset_ns), away from the
//     windows' edges;
//   - the two hosts together never admit more than 10 in a second of the
//     real clock (one more where an answer crossed the boundary).
//
// On the host's own clock (before this): 3 s ahead, every batch was
// refused (400 clock_skew), the host stale, 0 of 12 admitted; 3 s and
// 1.5 s behind, every request waited for a lease of a window it never
// reached, 0 of 12; 1.5 s ahead, 13-16 admitted in a real second.
func TestSkewedHostRunsOnCoordinatorsTime(t *testing.T) {
	for _, off := range []time.Duration{3 * time.Second, 1500 * time.Millisecond, -1500 * time.Millisecond, -3 * time.Second} {
		t.Run(off.String(), func(t *testing.T) {
			cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
				{Name: "s", Algorithm: wire.FixedWindow, Limit: 10, Period: int64(time.Second), Mode: wire.Strict, FailPolicy: wire.FailClosed}}}
			k := startCoord(t, t.TempDir(), "127.0.0.1:0", cfg, nil)
			defer k.stop(t)
			sync := syncloop.Options{Interval: 100 * time.Millisecond}
			honest := serve(t, Options{Config: cfg, Isolates: 1, Coordinator: "http://" + k.addr, Sync: sync})
			skewed := serve(t, Options{Config: cfg, Isolates: 1, Coordinator: "http://" + k.addr, Sync: sync,
				Clock: fastClock{int64(off)}})

			get := func(s served, key string) (bool, int64, time.Time) {
				resp, err := http.Get(s.url + "/v1/decide?" + url.Values{"limiter": {"s"}, "key": {key}}.Encode())
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var d decisionJSON
				json.NewDecoder(resp.Body).Decode(&d)
				return resp.StatusCode == http.StatusOK, d.Reset, time.Now()
			}
			alone, wrongWindow := 0, 0
			for i := 0; i < 12; i++ {
				offBoundary() // the lease race at a window's end (idle_test.go) is not this test's
				ok, reset, at := get(skewed, "alone")
				if ok {
					alone++
				}
				if r := at.UnixNano() % int64(time.Second); ok && r > int64(100*time.Millisecond) && r < int64(900*time.Millisecond) &&
					reset != at.Truncate(time.Second).Add(time.Second).UnixNano() {
					wrongWindow++
				}
				time.Sleep(250 * time.Millisecond)
			}
			perSecond := map[int64][2]int{}
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(30 * time.Millisecond) {
				for i, s := range []served{honest, skewed} {
					if ok, _, at := get(s, "shared"); ok {
						n := perSecond[at.Unix()]
						n[i]++
						perSecond[at.Unix()] = n
					}
				}
			}
			_, hl := skewed.health(t)
			t.Logf("clock %v: alone %d of 12 admitted (%d naming another window); admitted per second [honest skewed]: %v; skewed host: %d sync errors, clock offset %d ms",
				off, alone, wrongWindow, perSecond, skewed.h.SyncErrors(), hl.ClockOffsetMS)
			if alone < 11 {
				t.Errorf("clock %v: the skewed host alone admitted %d of 12 requests at a quarter of the limit, want 11 or more (its first may wait for a sync)", off, alone)
			}
			if wrongWindow > 0 {
				t.Errorf("clock %v: %d answers named another window than the coordinator's", off, wrongWindow)
			}
			for s, n := range perSecond {
				if n[0]+n[1] > 11 {
					t.Errorf("clock %v: second %d: %d admitted (honest %d, skewed %d), over the limit of 10", off, s, n[0]+n[1], n[0], n[1])
				}
			}
			if got := time.Duration(hl.ClockOffsetMS) * time.Millisecond; (got + off).Abs() > 100*time.Millisecond {
				t.Errorf("clock %v: the host's clock offset is %v, want about %v", off, got, -off)
			}
			metric := math.NaN()
			for _, l := range strings.Split(skewed.metrics(t), "\n") {
				if v, ok := strings.CutPrefix(l, "edgelimit_edge_clock_offset_seconds "); ok {
					metric, _ = strconv.ParseFloat(v, 64)
				}
			}
			if !(math.Abs(metric+off.Seconds()) <= 0.1) {
				t.Errorf("clock %v: edgelimit_edge_clock_offset_seconds %v, want about %v", off, metric, -off.Seconds())
			}
		})
	}
}
