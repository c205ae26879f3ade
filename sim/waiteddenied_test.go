package sim

import (
	"testing"
	"time"
)

// Denials that waited are counted apart: central waits a round trip for
// every decision, so each of its denials waited; approximate decides
// from its cache and the others' estimated pace (it waits only for a cold
// key's first view, which this key has after its first second);
// on overload-1.9x auto denies some requests only after asking (an
// isolate learns a window is full from a reply) and others locally.
func TestWaitedDeniedCounted(t *testing.T) {
	const d = 5 * time.Second
	c := runBuiltin(t, "corpus/overload-1.9x", d, Central, 100*time.Millisecond)
	if c.Denied == 0 || c.WaitedDenied != c.Denied {
		t.Errorf("central: %d of %d denials waited, want all (and some)", c.WaitedDenied, c.Denied)
	}
	l := runBuiltin(t, "corpus/overload-1.9x", d, Approximate, 100*time.Millisecond)
	if l.Denied == 0 || l.WaitedDenied != 0 {
		t.Errorf("approximate: %d of %d denials waited, want none", l.WaitedDenied, l.Denied)
	}
	a := runBuiltin(t, "corpus/overload-1.9x", d, Auto, 100*time.Millisecond)
	if a.WaitedDenied == 0 || a.WaitedDenied >= a.Denied || a.WaitedDenied >= a.Waited {
		t.Errorf("auto: %d denials waited, of %d denials and %d waits: want some denials local and some waits admitted",
			a.WaitedDenied, a.Denied, a.Waited)
	}
	want := 100 * float64(a.WaitedDenied) / float64(a.Requests)
	if a.WaitedDeniedPct != want || a.WaitedDeniedPct >= a.WaitedPct {
		t.Errorf("auto: waited_denied_pct %.2f, want %.2f (under waited %.2f%%)", a.WaitedDeniedPct, want, a.WaitedPct)
	}
	t.Logf("overload-1.9x, %v: central %d/%d denials waited, auto %d/%d (%.1f%% of decisions; waited %.1f%%)",
		d, c.WaitedDenied, c.Denied, a.WaitedDenied, a.Denied, a.WaitedDeniedPct, a.WaitedPct)
}
