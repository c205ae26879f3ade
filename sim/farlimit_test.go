package sim

import (
	"testing"
	"time"
)

// Far below a large limit (10,000 a second, 100 a second over 64 isolates:
// 1.6 requests per isolate and window), a sparse isolate stands with as
// many units as its requests in a window probably number
// (coordinator/merge sparseStandUnits), where every isolate could and the
// window's demand would still fit. With one unit each, every request after
// an isolate's first in a window asked: 45.9% of requests waited a round
// trip (scenarios/far-below-limit.json, 3 seeds; 10.0% now), and 62.0% of
// the decisions sent a sync (31.6% now). A key of 100 a second over the
// same fleet keeps one unit (the corpus's rows).
func TestFarBelowALargeLimitDecidesLocally(t *testing.T) {
	sc, err := LoadScenario("scenarios/far-below-limit.json")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = Duration(60 * time.Second) // half of it: the same figures, a test's time
	r := runScenario(t, sc, Auto)
	waited := r.WaitedPct
	t.Logf("requests %d, admitted %d, denied %d, waited %.1f%%, sync per decision %.1f%%", r.Requests, r.Admitted, r.Denied, waited, r.SyncPerDecision)
	// Nothing denied: seed 1 denied one request before a strict key's held
	// asks went with the demand a roll clears (wasm/core advance.go): held,
	// its ask was taken for one made already and never sent.
	if r.WorstOverrun != 0 || r.Denied != 0 {
		t.Fatalf("%d over, unserved %.3f%% at 1%% of the limit", r.WorstOverrun, r.UnservedPct)
	}
	if waited > 20 {
		t.Errorf("%.1f%% of the requests waited at 1%% of the limit, want at most 20%% (46%% with one unit ahead)", waited)
	}
}
