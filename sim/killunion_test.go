package sim

import (
	"strings"
	"testing"
	"time"
)

// Kills that together leave no isolate, none restarting, are refused as a
// single kill of all is: two kills of 2 of 4 isolates each, never
// restarting, were accepted. An isolate a later kill finds dead, with its
// restart to come, comes back (the kill leaves it be), so a fleet that
// restarts is accepted.
func TestKillsTogetherLeavingNone(t *testing.T) {
	s := func(at int) Duration { return Duration(time.Duration(at) * time.Second) }
	never := Duration(-1)
	for _, tc := range []struct {
		name  string
		kills []Kill
		want  string // "": accepted
	}{
		{"two halves", []Kill{{At: s(1), First: 0, Count: 2, Restart: never}, {At: s(2), First: 2, Count: 2, Restart: never}},
			"kills[1], at 2s"},
		{"halves, later first", []Kill{{At: s(3), First: 0, Count: 2, Restart: never}, {At: s(2), First: 2, Restart: never}},
			"kills[0], at 3s"},
		{"overlapping thirds", []Kill{{At: s(1), First: 0, Count: 3, Restart: never}, {At: s(1), First: 1, Count: 3, Restart: never}},
			"kills[1], at 1s"},
		{"one restarts", []Kill{{At: s(1), First: 0, Count: 2, Restart: never}, {At: s(2), First: 2, Count: 2, Restart: s(1)}}, ""},
		{"one spared", []Kill{{At: s(1), First: 0, Count: 2, Restart: never}, {At: s(2), First: 2, Count: 1, Restart: never}}, ""},
		{"restarted, killed again", []Kill{{At: s(1), First: 0, Count: 2, Restart: never}, {At: s(1), First: 2, Count: 2, Restart: s(1)},
			{At: s(3), First: 2, Count: 2, Restart: never}}, "kills[2], at 3s"},
		// Killed again while dead (at or before its restart): the kill
		// finds it dead, and it restarts as scheduled.
		{"killed while dead", []Kill{{At: s(1), First: 0, Count: 2, Restart: never}, {At: s(1), First: 2, Count: 2, Restart: s(1)},
			{At: s(2), First: 2, Count: 2, Restart: never}}, ""},
	} {
		sc := small(t, 4, 10, 100, "constant", 5*time.Second)
		sc.Kills = tc.kills
		err := sc.Prepare()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "nothing would answer") || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error saying nothing would answer, naming %q", tc.name, err, tc.want)
		}
	}
}
