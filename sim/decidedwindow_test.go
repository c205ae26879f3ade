package sim

import (
	"testing"
	"time"
)

// A request is offered in the window it is decided in (engine.record). At
// 1 request a second against a limit of 100 over 64 isolates nearly every
// request waits a round trip for a lease, and those held near a window's
// end are decided in the next one, which often has no request of its own:
// counted offered at arrival, such a window was never accounted, and the
// run read 98.0% utilisation (seed 1) with every request admitted.
func TestHeldAcrossWindowEndAccounted(t *testing.T) {
	sc, err := ParseScenario([]byte(`{
  "name": "one-per-second",
  "config": {"limiters": [{"name": "api", "algorithm": "fixed_window", "limit": 100, "period": "1s"}]},
  "isolates": 64, "locations": 8, "duration": "300s", "sync": ["100ms"],
  "traffic": [{"limiter": "api", "rate": 1, "keys": {"prefix": "api-"}}],
  "network": {"latency": {"dist": "fixed", "mean": "20ms"}}
}`), "")
	if err != nil {
		t.Fatal(err)
	}
	r := runScenario(t, sc, Auto)
	t.Logf("requests %d, offered %d, admitted %d, denied %d, waited %d, utilisation %.2f%%", r.Requests, r.Offered, r.Admitted, r.Denied, r.Waited, r.Utilisation)
	if r.Waited*2 < r.Requests {
		t.Fatalf("%d of %d requests waited: the case (held across a window's end) needs most to wait", r.Waited, r.Requests)
	}
	// (A request still held when the run ends is decided in no window.)
	if r.Denied != 0 || r.Admitted != r.Offered || r.Offered < r.Requests-1 {
		t.Fatalf("offered %d, admitted %d, denied %d of %d requests; want every request offered and admitted", r.Offered, r.Admitted, r.Denied, r.Requests)
	}
	if r.Utilisation != 100 {
		t.Errorf("utilisation %.2f%% with every request admitted and none over; want 100%%", r.Utilisation)
	}
}

// Requests held near a window's end and decided in the next wait for a
// reply more there (syncloop.Retry.NewWindow): their first asks were for
// the window that ended. With two replies in all, on zipf-1000 (1,000 keys
// of 20 a second, seed 1) they were denied in windows with room: unserved
// 0.98% of what the windows could admit, 0.52% with it. The first 10 s of
// it here (seeds 1-3: 0.89, 0.77, 1.12% without, 0.42, 0.35, 0.45% with),
// a third of the scenario's time under -race.
func TestHeldAcrossWindowEndAsksAgain(t *testing.T) {
	sc, err := LoadScenario("scenarios/corpus/zipf-1000.json")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = Duration(10 * time.Second)
	r := runScenario(t, sc, Auto)
	t.Logf("unserved %.2f%%, utilisation %.2f%%, stranded %.2f%%", r.UnservedPct, r.Utilisation, r.StrandedPct)
	if r.WorstOverrun != 0 {
		t.Fatalf("%d key-windows over", r.OverWindows)
	}
	if r.UnservedPct > 0.65 {
		t.Errorf("unserved %.2f%%, want at most 0.65%% (requests held across a window's end denied where it had room)", r.UnservedPct)
	}
}
