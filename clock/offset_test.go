package clock

import "testing"

// TestOffsetObserve: a reading moves the offset to the middle of the range
// it allows only when the offset is further than the tolerance outside it;
// impossible and absurd readings change nothing.
func TestOffsetObserve(t *testing.T) {
	base := NewManual(1_000_000_000_000)
	o := &Offset{Base: base, Tolerance: 50e6}
	if o.Now() != base.Now() {
		t.Fatalf("zero offset: Now %d, base %d", o.Now(), base.Now())
	}
	// The other clock is 3 s ahead; the round trip took 10 ms.
	if !o.Observe(0, 10e6, 3e9+5e6) || o.Offset() != 3e9 {
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
		if got := o.Observe(r.sent, r.recv, r.remote); got != r.moves || o.Offset() != r.want {
			t.Errorf("Observe(%d, %d, %d) = %v with offset %d, want %v and %d", r.sent, r.recv, r.remote, got, o.Offset(), r.moves, r.want)
		}
	}
	if o.Steps() != 3 {
		t.Errorf("%d steps, want 3", o.Steps())
	}
}
