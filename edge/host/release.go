package host

import "context"

// releaseSyncs bounds the syncs of one isolate's graceful stop: the batch
// still in flight, the last batch (wire.Batch.End) and, when the isolate
// holds more leased keys than one batch carries, a few more.
const releaseSyncs = 4

// release gives every isolate's leases back to the coordinator after the
// sync loops stopped: each isolate reports what it admitted, its last
// batch marked as the end, so the coordinator reserves nothing more for it
// (rather than until the leases expire). It is best effort: a coordinator
// that does not answer within SyncTimeout gets nothing, and the leases
// expire on their own.
func (h *Host) release() {
	if h.opts.Coordinator == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.SyncTimeout) // defaulted by New
	defer cancel()
	for _, s := range h.slots {
		if s.loop == nil {
			continue
		}
		s.mu.Lock()
		err := s.iso.Release(ctx)
		s.mu.Unlock()
		if err != nil {
			s.log.Warn("host: graceful stop: release", "err", err)
			continue
		}
		for range releaseSyncs {
			if err := s.loop.SyncOnce(ctx); err != nil {
				s.log.Warn("host: graceful stop: the last sync failed; the leases expire on their own", "err", err)
				break
			}
			if !s.ending() {
				break
			}
		}
	}
}

// ending reports whether the isolate still has a batch in flight or its
// last batch to cut.
func (s *slot) ending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.iso.Ending()
}
