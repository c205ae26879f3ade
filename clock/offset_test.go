package clock

import (
	"math"
	"testing"
)

// TestOffsetObserve: a reading moves the offset to the middle of the range
// it allows only when the offset is further than the tolerance outside it;
// impossible and absurd readings change nothing.
func TestOffsetObserve(t *testing.T) {
	base := NewManual(1_000_000_000_000)
	o := &Offset{Base: base, Tolerance: 50e6}
	if o.Now() != base.Now() {
		t.Fatalf("zero offset: Now %d, base %d", o.Now(), base.Now())
	}
	// Readings are times since the epoch (T: late 2025); the other clock
	// is 3 s ahead; the round trip took 10 ms.
	const T = int64(1_764_000_000e9)
	if !o.Observe(T, T+10e6, T+3e9+5e6) || o.Offset() != 3e9 {
		t.Fatalf("after a 3 s reading: offset %d, want 3e9", o.Offset())
	}
	if o.Now() != base.Now()+3e9 {
		t.Fatalf("Now %d, want base + 3 s", o.Now())
	}
	for _, r := range []struct {
		sent, recv, remote int64
		moves              bool
		want               int64
	}{
		{100e6, 110e6, 100e6 + 3e9 + 40e6, false, 3e9},      // 30-40 ms off: within the tolerance
		{200e6, 200e6 + 2e9, 200e6 + 3e9 + 1e9, false, 3e9}, // a slow round trip allows the offset
		{300e6, 301e6, 300e6 + 2e9, true, 2e9 - 500e3},      // 1 s off: moves, to the range's middle
		{400e6, 399e6, 0, false, 2e9 - 500e3},               // received before sent: ignored
		{500e6, 501e6, 500e6 + MaxOffset + 1e9, false, 2e9 - 500e3},
		{600e6, 601e6, 600e6 - 2e9, true, -2e9 - 500e3}, // behind
	} {
		if got := o.Observe(T+r.sent, T+r.recv, T+r.remote); got != r.moves || o.Offset() != r.want {
			t.Errorf("Observe(%d, %d, %d) = %v with offset %d, want %v and %d", r.sent, r.recv, r.remote, got, o.Offset(), r.moves, r.want)
		}
	}
	if o.Steps() != 3 {
		t.Errorf("%d steps, want 3", o.Steps())
	}
}

// A reading past MaxOffset is taken when the next one agrees with it (a
// host clock a day or more off: a dead real-time clock, a restored
// snapshot), so such a host is put right by its second answer; a lone one
// (a garbled header), or two that disagree, change nothing. Before, every
// such reading was ignored and the host stayed stale for good (25 h off:
// every batch refused as clock skew, 50 sync errors in a run).
func TestOffsetFarReadingsTakenWhenTheyAgree(t *testing.T) {
	o := &Offset{Base: NewManual(1_000_000_000_000)}
	const day = int64(25 * 3600e9)
	if o.Observe(0, 10e6, day) || o.Offset() != 0 {
		t.Fatalf("one reading 25 h ahead: offset %d, want 0 (not yet)", o.Offset())
	}
	if o.Observe(1e9, 1e9+10e6, 1e9+day+10*FarAgree) || o.Offset() != 0 {
		t.Fatalf("a second far reading 10 s from the first: offset %d, want 0", o.Offset())
	}
	if !o.Observe(2e9, 2e9+10e6, 2e9+day+10*FarAgree+100e6) || o.Offset() < day+10*FarAgree || o.Offset() > day+10*FarAgree+100e6 {
		t.Fatalf("a far reading agreeing with the one before: offset %d, want about %d", o.Offset(), day+10*FarAgree+100e6)
	}
	// A garbled header between honest readings moves nothing.
	if o.Observe(3e9, 3e9+10e6, 3e9-day) || o.Observe(4e9, 4e9+10e6, 4e9+day+10*FarAgree+100e6) {
		t.Fatalf("offset moved to %d by a lone far reading", o.Offset())
	}
	// A far reading, then a near one: the near one moves it, not as far.
	if o.Observe(5e9, 5e9+10e6, 5e9-2*day) || !o.Observe(6e9, 6e9+10e6, 6e9+10e6) {
		t.Fatalf("a far reading then a near one: offset %d", o.Offset())
	}
	if o.Offset() > 20e6 || o.Offset() < 0 {
		t.Fatalf("after a near reading: offset %d, want about 5 ms", o.Offset())
	}
}

// TestOffsetIgnoresReadingsNoClockGives: readings past MaxReading or
// before the epoch are ignored, even when two agree: a constant header
// near 2^63 (a broken proxy) was taken as a far offset, and Now overflowed.
func TestOffsetIgnoresReadingsNoClockGives(t *testing.T) {
	o := &Offset{Base: NewManual(1_764_000_000_000_000_000)}
	base := o.Base.Now()
	for _, remote := range []int64{math.MaxInt64, MaxReading + 1, -1, math.MinInt64} {
		for i := int64(0); i < 3; i++ {
			if o.Observe(base+i*1e9, base+i*1e9+10e6, remote) {
				t.Fatalf("reading %d taken", remote)
			}
		}
		if o.Offset() != 0 || o.Now() != base {
			t.Fatalf("after readings of %d: offset %d, now %d", remote, o.Offset(), o.Now())
		}
	}
	if !o.Observe(base, base+10e6, base+3e9) || o.Offset() < 2.9e9 {
		t.Fatalf("an honest reading 3 s ahead after them: offset %d", o.Offset())
	}
}
