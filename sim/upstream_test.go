package sim

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestUpstreamFeedback runs the shipped llm-upstream scenario (a 6 req/s
// API behind a limiter configured at 10) for 30 s, on two seeds: the
// isolates that observe the API's answers get at most one 429 each per
// upstream window that refused, far fewer 429s in all than the same mode
// without feedback, and keep the API's true limit used.
func TestUpstreamFeedback(t *testing.T) {
	sc, err := Builtin("llm-upstream")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = Duration(30 * time.Second)
	s := testSim(t)
	for _, seed := range []uint64{1, 2} {
		plain, err := s.Run(context.Background(), sc, Auto, 100*time.Millisecond, seed, nil)
		if err != nil {
			t.Fatal(err)
		}
		fb, err := s.Run(context.Background(), sc, Auto+FeedbackSuffix, 100*time.Millisecond, seed, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: auto 429s %d util %.1f%% worst %d; auto+feedback 429s %d util %.1f%% worst %d", seed,
			plain.Upstream429, plain.UpstreamUtilisation, plain.Upstream429WorstIsolate,
			fb.Upstream429, fb.UpstreamUtilisation, fb.Upstream429WorstIsolate)
		if plain.Upstream429 == 0 || plain.Upstream429WorstIsolate < 2 {
			t.Fatalf("without feedback: %d 429s, worst %d per isolate-window: the scenario no longer overloads the API",
				plain.Upstream429, plain.Upstream429WorstIsolate)
		}
		if fb.Upstream429WorstIsolate > 1 {
			t.Errorf("with feedback an isolate got %d 429s in one upstream window, want at most 1", fb.Upstream429WorstIsolate)
		}
		if fb.Upstream429*3 > plain.Upstream429 {
			t.Errorf("with feedback %d 429s, without %d: want at least 3x fewer", fb.Upstream429, plain.Upstream429)
		}
		if fb.UpstreamUtilisation < 90 {
			t.Errorf("with feedback the API's limit is %.1f%% used, want >= 90%%", fb.UpstreamUtilisation)
		}
	}
}

// An outage (503s without Retry-After) opens the key's circuit: auto
// isolates that observe the answers send far fewer requests into it, and
// the circuit closes again once a probe passes.
func TestUpstreamOutageOpensCircuit(t *testing.T) {
	sc, err := Builtin("llm-upstream")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = Duration(20 * time.Second)
	sc.Upstream.Outages = []Outage{{Start: Duration(5 * time.Second), Duration: Duration(10 * time.Second)}}
	s := testSim(t)
	plain, err := s.Run(context.Background(), sc, Auto, 100*time.Millisecond, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := s.Run(context.Background(), sc, Auto+FeedbackSuffix, 100*time.Millisecond, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain.UpstreamFailed < 50 || fb.UpstreamFailed*3 > plain.UpstreamFailed {
		t.Fatalf("503s during a 10 s outage: %d without feedback, %d with: want the circuit to cut them 3x", plain.UpstreamFailed, fb.UpstreamFailed)
	}
	t.Logf("503s: %d without feedback, %d with; accepted %d and %d", plain.UpstreamFailed, fb.UpstreamFailed, plain.UpstreamAccepted, fb.UpstreamAccepted)
	if fb.UpstreamAccepted < plain.UpstreamAccepted*8/10 {
		t.Fatalf("after the outage the circuit let %d through, without it %d: it must close again", fb.UpstreamAccepted, plain.UpstreamAccepted)
	}
}

func TestUpstreamScenarioErrors(t *testing.T) {
	for _, tc := range []struct{ js, want string }{
		{`"upstream": {"limit": 0}`, "upstream.limit"},
		{`"upstream": {"limit": 5, "headers": "carrier-pigeon"}`, "upstream.headers"},
		{`"upstream": {"limit": 5, "changes": [{"at": "1s", "limit": 0}]}`, "upstream.changes[0]"},
		{`"strategies": ["location+feedback"], "upstream": {"limit": 5}`, "location+feedback"},
	} {
		js := `{"config": {"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 5, "period": "1s"}]}, ` + tc.js + `}`
		if _, err := ParseScenario([]byte(js), ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.js, err, tc.want)
		}
	}
}
