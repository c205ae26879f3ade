package sim

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Local-only isolates under overload each admit exactly the limit per
// window, so kills show in the admitted count exactly: a dead isolate
// decides nothing (its traffic goes to the live ones, which are full), and
// a new incarnation starts cold (the old one's counts die with it).
func TestKillStopsDecidingAndLosesState(t *testing.T) {
	s := testSim(t)
	run := func(kills ...Kill) Result {
		t.Helper()
		sc := small(t, 8, 10, 1000, "constant", 10*time.Second)
		sc.Kills = kills
		if err := sc.Prepare(); err != nil {
			t.Fatal(err)
		}
		r, err := s.Run(context.Background(), sc, LocalOnly, 100*time.Millisecond, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base := run()
	for _, tc := range []struct {
		name  string
		kill  Kill
		want  int64
		kills int64
	}{
		// 10 windows x 8 isolates x 10.
		{"none", Kill{}, 800, 0},
		// 4 of 8 die at 5 s and never come back: 5 windows at 80, 5 at 40.
		{"never", Kill{At: Duration(5 * time.Second), First: 4, Restart: -1}, 600, 4},
		// The fleet restarts at 5.5 s: the new incarnations admit their 10
		// again in window 5 (the old ones' counts are lost).
		{"fleet", Kill{At: Duration(5500 * time.Millisecond)}, 880, 8},
		// 4 die at 5.5 s, new ones start 2 s later: window 6 at 40,
		// window 7 at 40 before 7.5 s and 40 after.
		{"delayed", Kill{At: Duration(5500 * time.Millisecond), Count: 4, Restart: Duration(2 * time.Second)}, 760, 4},
	} {
		r := base
		if tc.name != "none" {
			r = run(tc.kill)
		}
		if r.Admitted != tc.want || r.Kills != tc.kills || r.Requests != base.Requests {
			t.Errorf("%s: admitted %d of %d requests, %d killed; want %d of %d, %d", tc.name, r.Admitted, r.Requests,
				r.Kills, tc.want, base.Requests, tc.kills)
		}
	}
}

// Strict isolates killed mid-window strand at most what their leases held
// for that window (leases end by time and are sized to what an isolate
// uses before its next sync): the new incarnations are refused little, and
// no window goes over. The same run twice gives the same result.
func TestKilledIsolatesStrandLittle(t *testing.T) {
	s := testSim(t)
	run := func(kills ...Kill) Result {
		t.Helper()
		sc := small(t, 8, 1000, 200, "poisson", 30*time.Second)
		sc.Config.Limiters[0].Period = "10s"
		sc.Kills = kills
		if err := sc.Prepare(); err != nil {
			t.Fatal(err)
		}
		r, err := s.Run(context.Background(), sc, Strict, 100*time.Millisecond, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base := run()
	k := Kill{At: Duration(15 * time.Second)}
	killed, again := run(k), run(k)
	if killed != again {
		t.Fatalf("same seed, different results:\n%+v\n%+v", killed, again)
	}
	if killed.Kills != 8 || killed.WorstOverrunPct != 0 || base.WorstOverrunPct != 0 {
		t.Fatalf("%d killed, worst window %.2f%% over (%.2f%% without kills); want 8, 0", killed.Kills,
			killed.WorstOverrunPct, base.WorstOverrunPct)
	}
	t.Logf("stranded %d/%d unserved %d/%d admitted %d/%d", killed.Stranded, base.Stranded, killed.Unserved, base.Unserved, killed.Admitted, base.Admitted)
	// One lifetime and its grace (2 s) of the fleet's offered 200/s is
	// 400: the most the dead isolates' leases could hold.
	if killed.Stranded > 400 || killed.Stranded > killed.Unserved {
		t.Errorf("stranded %d with the fleet killed mid-window, %d without; unserved %d: want at most 400, within unserved",
			killed.Stranded, base.Stranded, killed.Unserved)
	}
}

func TestKillValidation(t *testing.T) {
	for _, tc := range []struct {
		kill Kill
		want string
	}{
		{Kill{First: 8}, "first"},
		{Kill{First: 4, Count: 5}, "first"},
		{Kill{At: Duration(-1)}, "at >= 0"},
		{Kill{Restart: -1}, "none restarts"},
	} {
		sc := small(t, 8, 10, 100, "constant", time.Second)
		sc.Kills = []Kill{tc.kill}
		if err := sc.Prepare(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.kill, err, tc.want)
		}
	}
}

// A dead isolate's requests are spread over the live isolates of its
// location, as a load balancer does, not all sent to one: local-only
// isolates (each admits its own 10 per window) under 6 requests per
// isolate per window, 4 of 8 killed at 5 s for good. Spread, each live
// isolate gets about 12 a window and admits nearly its 10; sent to the
// next live one in index order, isolate 0 got 30 and admitted 10 of them
// (376 admitted in all, 437 spread).
func TestDeadIsolatesTrafficIsSpread(t *testing.T) {
	s := testSim(t)
	sc := small(t, 8, 10, 48, "constant", 10*time.Second)
	sc.Kills = []Kill{{At: Duration(5 * time.Second), First: 4, Restart: -1}}
	if err := sc.Prepare(); err != nil {
		t.Fatal(err)
	}
	r, err := s.Run(context.Background(), sc, LocalOnly, 100*time.Millisecond, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("admitted %d of %d", r.Admitted, r.Requests)
	// 5 windows at 48 before the kill; after it, 4 live isolates at
	// about 12 requests a window each.
	if r.Admitted < 5*48+5*35 {
		t.Fatalf("admitted %d of %d, want at least %d: the dead isolates' requests went to too few live ones", r.Admitted, r.Requests, 5*48+5*35)
	}
}
