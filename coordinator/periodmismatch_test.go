package coordinator

import (
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// An edge that still runs a limiter with another period (the coordinator
// restarted with a new file, the edges not yet) names windows of that
// period: its items of that limiter are taken out as uncounted
// (period_mismatch, named in Edgelimit-Uncounted) and the rest of its
// batch is counted. Before, a shorter period's windows had the whole
// batch refused as clock skew at every retry, and a longer one's were
// taken as ancient windows whose views the module refused: every limiter
// of that edge went uncounted (real processes: an untouched approximate
// limiter of 300 an hour admitted 1,191 in an hour and counted 0). The
// windows of the coordinator's own period, the previous one included, are
// counted as before, and a window just past the allowed skew is still a
// clock problem (400 clock_skew), not another period.
func TestOtherPeriodIsUncountedNotWedged(t *testing.T) {
	c, clk, srv := newTestServer(t, nil)
	now := time.Date(2026, 11, 29, 21, 30, 0, 0, time.UTC).UnixNano()
	clk.set(now)
	seq := int64(0)
	send := func(fwWindow int64) (int, string) {
		t.Helper()
		seq++
		b := batch("a", seq, now, wire.Delta{Limiter: "fw", Key: "k", Window: fwWindow, Delta: 1},
			wire.Delta{Limiter: "sw", Key: "k", Window: now / sec, Delta: 1})
		st, uncounted, _ := syncUncounted(t, srv, "", b)
		return st, uncounted
	}
	for i, w := range []int64{now / (2 * sec), now / (sec / 2), now / (sec + sec/1000)} {
		if st, un := send(w); st != 200 || un != "fw" {
			t.Fatalf("fw's window of another period (%d): %d, uncounted %q; want 200 and fw uncounted", i, st, un)
		}
		if ks := getKey(t, c, "sw", "k"); ks.Count != int64(i+1) {
			t.Fatalf("sw counted %d after %d batches, want every one", ks.Count, i+1)
		}
	}
	if st, un := send(now/sec - 1); st != 200 || un != "" {
		t.Fatalf("fw's previous window: %d, uncounted %q; want it counted", st, un)
	}
	if st, un := send(now/sec + 5); st != 400 || un != "" {
		t.Fatalf("fw's window 5 s ahead: %d, uncounted %q; want 400 clock_skew", st, un)
	}
	seq-- // refused: the same sequence number again
	if st, un := send(now / sec); st != 200 || un != "" {
		t.Fatalf("fw's current window: %d, uncounted %q", st, un)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 1 {
		t.Fatalf("fw counted %d, want the one batch of its period's current window", ks.Count)
	}
}
