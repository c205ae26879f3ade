package sim

import (
	"strings"
	"testing"
)

// FuzzParseTimelineChoice: any --timeline value either parses to a known
// strategy (with a positive interval, or none for local-only and central)
// or is refused with an error naming the expected form; never a panic.
func FuzzParseTimelineChoice(f *testing.F) {
	for _, s := range []string{"auto@100ms", "strict@1d", "local-only", "central@5s", "auto", "auto@", "@1s", "auto@-1s", "auto@1s@2s", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, iv, err := ParseTimelineChoice(s)
		if err != nil {
			if !strings.Contains(err.Error(), "strategy@interval") && !strings.Contains(err.Error(), "needs an interval") {
				t.Fatalf("%q: unclear error %v", s, err)
			}
			return
		}
		if !validStrategy(st) || iv < 0 || iv == 0 && st != LocalOnly && st != Central {
			t.Fatalf("%q parsed to %q %v", s, st, iv)
		}
	})
}
