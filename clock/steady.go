package clock

import "time"

// Steady is a wall clock that never steps: the wall time when it was made
// plus the monotonic time elapsed since. An operating system clock set
// back (or forward) does not move it; it drifts from the wall clock by
// what the system corrected since. Edge hosts run on it under the
// coordinator's offset (Offset), which takes up that drift at the next
// reading, so the only steps their isolates see are the offset's, which
// they are told of (wasm/core ClockOffset): a step they are not told of
// could leave a lease alive past the coordinator's record of it.
type Steady struct {
	start time.Time // carries a monotonic reading
}

// NewSteady returns a Steady clock starting at the wall time now.
func NewSteady() *Steady { return &Steady{start: time.Now()} }

// Now returns the steady time, ns since the Unix epoch.
func (s *Steady) Now() int64 { return s.start.UnixNano() + int64(time.Since(s.start)) }

// After returns a channel that receives once d ns have passed.
func (s *Steady) After(d int64) <-chan struct{} { return Real.After(d) }
