package clock

import (
	"strings"
	"testing"
	"time"
)

// A Steady clock starts at the wall time and moves with the monotonic
// clock: never back between two reads, and within a few ms of the wall
// clock over a short span (nothing sets the system clock in a test).
func TestSteadyFollowsTheMonotonicClock(t *testing.T) {
	s := NewSteady()
	prev := s.Now()
	if d := prev - time.Now().UnixNano(); d > int64(50*time.Millisecond) || d < -int64(50*time.Millisecond) {
		t.Fatalf("a new Steady clock is %d ns off the wall clock", d)
	}
	for i := 0; i < 1000; i++ {
		n := s.Now()
		if n < prev {
			t.Fatalf("read %d went back by %d ns", i, prev-n)
		}
		prev = n
	}
	// It moves by the monotonic reading it keeps (time.Time prints it as
	// "m=..."); a clock set back would move the wall reading, not that.
	if !strings.Contains(s.start.String(), " m=") {
		t.Fatalf("the start time carries no monotonic reading: %s", s.start)
	}
}
