package sim

import (
	"testing"
	"time"
)

// In requests mode (Scenario.Background, as Workers run the JavaScript
// package) an isolate syncs only around its requests: cut off from the
// coordinator after a second of traffic, it makes at most one attempt per
// request, where in timers mode the backoff's timers keep trying through
// the quiet rest of the run.
func TestRequestsModeSyncsOnlyAroundRequests(t *testing.T) {
	s := testSim(t)
	attempts := map[string]int64{}
	var requests int64
	for _, mode := range []string{BackgroundTimers, BackgroundRequests} {
		sc := small(t, 4, 100, 8, "constant", 20*time.Second)
		sc.Locations = 1
		sc.Background = mode
		sc.Traffic[0].Pattern = Pattern{Kind: "onoff", On: Duration(time.Second), Off: Duration(time.Hour)}
		loc := 0
		sc.Network.Partitions = []Partition{{Location: &loc, Duration: Duration(time.Hour)}}
		if err := sc.Prepare(); err != nil {
			t.Fatal(err)
		}
		r, err := s.Run(t.Context(), sc, Approximate, 100*time.Millisecond, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		attempts[mode], requests = r.SyncRequests, r.Requests
	}
	if requests < 6 || attempts[BackgroundRequests] < 2 || attempts[BackgroundRequests] > requests || attempts[BackgroundTimers] < 2*requests {
		t.Errorf("%d requests in the first second, cut off for the run: %d attempts in requests mode, %d in timers mode; want at least two and at most one per request, and the timers' backoff retrying through the run",
			requests, attempts[BackgroundRequests], attempts[BackgroundTimers])
	}
}
