package clock

import "sync/atomic"

// Header is the HTTP response header in which the coordinator tells its
// time on every answer to POST /v1/sync (applied, refused or failed): a
// decimal count of ns since the Unix epoch, read on its Clock while it
// handled the request. Edge hosts run on that time (Offset).
const Header = "Edgelimit-Time"

// DefaultOffsetTolerance is the default Offset.Tolerance: 5 ms. A reading
// brackets the true offset (the other clock was read between sent and
// recv), so the tolerance covers only the clocks' own resolution; it is
// also the most a drifting host's time moves past the bracket before a
// step pulls it back (at 50 ms, a host clock drifting 5% let two
// isolates admit 12 in a second of a strict 10/s key: edge/js
// clock.test.js).
const DefaultOffsetTolerance = int64(5e6)

// MaxOffset bounds the offset an Offset takes from one reading: 24 h (ns).
// A reading that would put the clocks further apart is taken only when the
// next reading agrees with it (within FarAgree and the two round trips), so
// a garbled header cannot move a host's time by years, and a host whose
// clock is a day or more off (a dead real-time clock, a restored snapshot)
// is still put right, by its second answer. (Ignored, as before, such a
// host stayed stale for good: every batch refused as clock skew, or every
// reply refused.)
const MaxOffset = int64(24 * 3600e9)

// MaxReading bounds a reading of the other clock Observe takes: 2^62 ns
// since the epoch (the year 2116). A reading past it, or before the epoch,
// is no clock's: two such readings that agreed (a broken proxy's constant
// header near 2^63) were taken, and Base's time plus the offset then
// overflowed, every decision refused as a negative time for good.
const MaxReading = int64(1) << 62

// FarAgree is how close (ns) the reading after a reading past MaxOffset
// must be to it for the offset to be taken: 1 s, beyond the round trips.
const FarAgree = int64(1e9)

// Offset is a Clock that runs on another clock's time: Base plus an offset
// learned from readings of the other clock (Observe). An edge host runs on
// its coordinator's time, so that its windows, batch times and lease lives
// are the coordinator's even when its own clock is off by seconds (a host
// ahead by more than the coordinator's allowed skew would have every batch
// refused; one behind would wait for leases of windows it never reaches).
// Its zero offset reads Base. It is safe for concurrent use.
type Offset struct {
	// Base is the host's own clock. Required.
	Base Clock
	// Tolerance (ns) is how far the offset may be from a reading before
	// it moves: readings within it (round-trip noise) change nothing, so
	// the time seen by the isolates steps only when the clocks really
	// disagree. Default (0) DefaultOffsetTolerance.
	Tolerance int64
	off       atomic.Int64
	steps     atomic.Int64
	read      atomic.Bool
	far       atomic.Int64 // the last reading past MaxOffset (its middle), not yet confirmed; 0: none
}

// Read reports whether Observe took a reading (moved the offset or not).
func (o *Offset) Read() bool { return o.read.Load() }

// Now returns Base's time plus the offset, ns.
func (o *Offset) Now() int64 { return o.Base.Now() + o.off.Load() }

// After waits on Base: durations are the same on both clocks.
func (o *Offset) After(d int64) <-chan struct{} { return o.Base.After(d) }

// Offset returns what Now adds to Base's time, ns.
func (o *Offset) Offset() int64 { return o.off.Load() }

// Steps counts the times Observe moved the offset.
func (o *Offset) Steps() int64 { return o.steps.Load() }

// Observe takes one reading: the other clock read remote (ns) at some
// moment between sent and recv, both read on Base (ns). The true offset
// is then within [remote-recv, remote-sent]; when the current one is
// further than Tolerance outside that range, it moves to the range's
// middle (within half the round trip of the truth) and Observe reports
// true. A reading with recv < sent is ignored, so is one with a time
// outside [0, MaxReading], and one past MaxOffset
// unless the reading before it was past MaxOffset too and within FarAgree
// (plus both readings' round trips) of it.
func (o *Offset) Observe(sent, recv, remote int64) bool {
	if recv < sent || remote < 0 || remote > MaxReading || sent < 0 || recv > MaxReading {
		return false
	}
	tol := o.Tolerance
	if tol <= 0 {
		tol = DefaultOffsetTolerance
	}
	lo, hi := remote-recv, remote-sent
	mid := lo + (hi-lo)/2
	if mid > MaxOffset || mid < -MaxOffset {
		prev := o.far.Swap(mid)
		if d := prev - mid; prev == 0 || d > FarAgree+(hi-lo) || d < -FarAgree-(hi-lo) {
			return false // the first such reading: taken only when the next agrees
		}
		o.far.Store(0)
	} else {
		o.far.Store(0)
	}
	o.read.Store(true)
	if cur := o.off.Load(); cur >= lo-tol && cur <= hi+tol {
		return false
	}
	o.off.Store(mid)
	o.steps.Add(1)
	return true
}
