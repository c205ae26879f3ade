package host

import (
	"context"

	"github.com/edgelimit/edgelimit/edge/syncloop"
)

// readMark is a slot's transport as its loop sees it: while an attempt
// reads the coordinator's time before its batch is cut (syncloop.Reader,
// until the first answer), it marks the slot (slot.reading), so that the
// view turns stale once that read has been in flight past SlowAttempt, as
// with a batch in flight, and a request on the stale view abandons it as
// hung (probeSlot). Before, a coordinator that hung from the start held
// the read for the whole sync timeout (5 s): no view was stale, strict
// and auto keys denied every request after its retry wait (1 s) under
// every fail policy, and after that every request waited for a probe that
// hung in turn.
type readMark struct {
	timedTransport
	s *slot
}

// Ready implements syncloop.Reader.
func (t readMark) Ready(ctx context.Context) error {
	t.s.reading.Store(max(t.s.clk.Now(), 1))
	defer t.s.reading.Store(0)
	return t.timedTransport.Ready(ctx)
}

var _ syncloop.Reader = readMark{}
