package isolate

import "context"

// FollowOffset makes the isolate tell its module the offset of the clock
// its host passes times on (the host's own clock plus the coordinator's
// offset, clock.Offset.Offset) whenever it changed, before each call that
// passes a time: a lower offset is a step back, and the module moves its
// lease ends back with it, so a lease never outlives the coordinator's
// record of it (core.Core.ClockOffset). f is read once per such call; nil
// stops following. A module without el_clock_offset is told nothing.
func (i *Isolate) FollowOffset(f func() int64) {
	i.offsetOf = f
}

// follow tells the module a changed clock offset (FollowOffset).
func (i *Isolate) follow(ctx context.Context) error {
	if i.offsetOf == nil || i.clockOffset == nil {
		return nil
	}
	off := i.offsetOf()
	if off == i.told {
		return nil
	}
	i.stack[0] = uint64(off)
	if err := i.status(ctx, "clock offset", i.clockOffset); err != nil {
		return err
	}
	i.told = off
	return nil
}
