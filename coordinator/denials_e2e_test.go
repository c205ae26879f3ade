package coordinator_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/coordinator/dashboard"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The coordinator's "denied" is what users saw: the 429s of a real edge
// host (the module reports its final denials), not what the isolates asked
// for and did not admit. A strict request that waits for a lease and
// passes after the sync counts as admitted only; a denial the view alone
// decides (no sync) counts once it rides along with a later batch.
func TestDeniedIsWhatUsersSaw(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "strict", Algorithm: wire.FixedWindow, Limit: 5, Period: int64(time.Hour), Mode: wire.Strict},
		{Name: "approx", Algorithm: wire.FixedWindow, Limit: 5, Period: int64(time.Hour), Mode: wire.Approximate},
	}}
	c, err := coordinator.Open(coordinator.Options{InMemory: true, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	curl := serveLoopback(t, c)
	_, hurl := serveEdge(t, host.Options{Config: cfg, Isolates: 1, Coordinator: curl, IDPrefix: "den",
		Sync: syncloop.Options{Interval: 50 * time.Millisecond}})
	decide := func(limiter, key string) int {
		t.Helper()
		resp, err := http.Get(hurl + "/v1/decide?limiter=" + limiter + "&key=" + key)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	saw := map[string]int64{}
	for _, lim := range []string{"strict", "approx"} {
		for i := 0; i < 9; i++ {
			switch st := decide(lim, "k"); st {
			case 200:
			case 429:
				saw[lim]++
			default:
				t.Fatalf("%s: status %d", lim, st)
			}
			time.Sleep(60 * time.Millisecond) // a sync interval: the approximate isolate sees the count
		}
		// A request on another key makes a batch the denials ride along with.
		if st := decide(lim, "other"); st != 200 {
			t.Fatalf("%s/other: %d", lim, st)
		}
	}
	if saw["strict"] < 4 || saw["approx"] < 1 {
		t.Fatalf("429s: %v; want at least 4 of 9 on strict (limit 5) and some on approx", saw)
	}
	var ls dashboard.LimitersView
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st := getJSON(t, curl, "/v1/limiters", &ls); st != 200 {
			t.Fatalf("GET /v1/limiters: %d", st)
		}
		got := map[string][2]int64{}
		for _, l := range ls.Limiters {
			got[l.Name] = [2]int64{l.Admitted, l.Denied}
		}
		ok := true
		for _, lim := range []string{"strict", "approx"} {
			if want := [2]int64{10 - saw[lim], saw[lim]}; got[lim] != want {
				ok = false
				if time.Now().After(deadline) {
					t.Fatalf("%s: admitted, denied = %v at the coordinator; the edge answered %v (200s, 429s)", lim, got[lim], want)
				}
			}
		}
		if ok {
			return
		}
	}
}
