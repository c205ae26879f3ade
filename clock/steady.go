package clock

import (
	"sync/atomic"
	"time"
)

// Steady is a wall clock that never steps back: the wall time when it was
// made plus the monotonic time elapsed since, moved forward when the wall
// clock runs more than SteadyCatchUp ahead of it (a host started before
// its clock was set, then set forward). An operating system clock set back
// does not move it; it drifts from the wall clock by what the system
// corrected since. Edge hosts with a coordinator run on it under the
// coordinator's offset (Offset), which takes up that drift at the next
// reading, so the only steps back their isolates see are the offset's,
// which they are told of (wasm/core ClockOffset): a step back they are not
// told of could leave a lease alive past the coordinator's record of it.
type Steady struct {
	start time.Time    // carries a monotonic reading
	ahead atomic.Int64 // ns added by catching up with the wall clock
}

// SteadyCatchUp is how far (ns) the wall clock may run ahead of a Steady
// clock before it moves forward to it: 1 s.
const SteadyCatchUp = int64(time.Second)

// NewSteady returns a Steady clock starting at the wall time now.
func NewSteady() *Steady { return &Steady{start: time.Now()} }

// Now returns the steady time, ns since the Unix epoch.
func (s *Steady) Now() int64 {
	for {
		a := s.ahead.Load()
		n := s.start.UnixNano() + int64(time.Since(s.start)) + a
		w := time.Now().UnixNano()
		if w-n <= SteadyCatchUp {
			return n
		}
		if s.ahead.CompareAndSwap(a, a+(w-n)) {
			return w
		}
	}
}

// After returns a channel that receives once d ns have passed.
func (s *Steady) After(d int64) <-chan struct{} { return Real.After(d) }
