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

// A Steady clock behind the wall clock by more than SteadyCatchUp (a host
// started before its clock was set forward) catches up with it, and never
// goes back doing so.
func TestSteadyCatchesUpForward(t *testing.T) {
	s := NewSteady()
	s.ahead.Store(-10 * int64(time.Second)) // as if the wall clock had moved 10 s forward since start
	before := s.start.UnixNano() + int64(time.Since(s.start)) - 10*int64(time.Second)
	n := s.Now()
	if w := time.Now().UnixNano(); n < before || n > w || w-n > SteadyCatchUp {
		t.Fatalf("Now %d; want caught up with the wall clock %d (within %d ns)", n, w, SteadyCatchUp)
	}
	if m := s.Now(); m < n {
		t.Fatalf("went back after catching up: %d then %d", n, m)
	}
}
