package host

import (
	"context"

	"github.com/edgelimit/edgelimit/edge/syncloop"
)

// Amendments (wasm/wire/amend.go). A request the isolate answers SyncRetry
// while a batch is in flight would wait for that batch's reply and then
// for the next batch's: two round trips. The slot sends an amendment of
// the batch instead, at once, next to the batch (one at a time), and
// applies both replies, whichever comes first (applyReply). While the
// amendment is on its way the loop cuts no new batch (the amendment's
// reply would be refused once one is cut), for at most syncloop.AmendHold.

// amend sends, for a request decided SyncRetry at now, an amendment of the
// slot's batch in flight, and reports whether it did: not when no batch is
// in flight, one is on its way already, or the isolate has nothing new to
// ask.
func (s *slot) amend(now int64) bool {
	if s.tr == nil || s.ctx == nil || s.ctx.Err() != nil || s.attemptAt.Load() == 0 || !s.amending.CompareAndSwap(false, true) {
		return false
	}
	s.mu.Lock()
	b, err := s.iso.Amend(s.ctx, now, nil)
	s.mu.Unlock()
	if err != nil || len(b) == 0 {
		s.amending.Store(false)
		return false
	}
	s.amendAt.Store(now)
	s.amendWG.Add(1)
	go s.sendAmend(b)
	return true
}

// sendAmend posts the amendment b and applies its reply. A failed
// amendment is not a failed sync: its requests wait for the batch's reply
// or the next batch, which the loop is asked for.
func (s *slot) sendAmend(b []byte) {
	defer s.amendWG.Done()
	r, err := s.tr.Sync(s.ctx, b, nil)
	s.amending.Store(false) // before the reply wakes the held requests: those still held ask in the next batch
	if err == nil {
		_, err = s.applyReply(s.ctx, r, s.clk.Now())
	}
	if err != nil && s.loop != nil {
		s.loop.Kick()
	}
}

// holdsBatch reports whether an amendment in flight holds the next batch
// back at now (see the package's amendments above).
func (s *slot) holdsBatch(now int64) bool {
	if !s.amending.Load() {
		return false
	}
	return now-s.amendAt.Load() < syncloop.AmendHold(s.rtt.Load())
}

// applyReply applies a reply of the slot's batch or of its amendment at
// now. first reports that it was the first applied for the batch (it ends
// the attempt); a second one brings views and leases only (the module
// refuses it once the next batch is cut, or when it is older than the
// first, with core.ErrStaleReply).
func (s *slot) applyReply(ctx context.Context, reply []byte, now int64) (first bool, err error) {
	s.mu.Lock()
	at := s.attemptAt.Load()
	first = at != 0
	err = s.iso.SyncIn(ctx, reply, now)
	if err == nil && first {
		s.rtt.Store(max(now-at, 0))
		s.attemptAt.Store(0)
		s.batches.Add(1)
	}
	s.mu.Unlock()
	if err != nil {
		return first, err
	}
	s.lastOK.Store(now)
	s.lastReply.Store(now)
	s.replies.Add(1)
	if n := s.failures.Swap(0); n > 0 {
		s.log.Info("host: sync recovered", "failed_attempts", n)
	}
	if first {
		s.unacked.Store(0)
	}
	s.ended()
	s.sayForeign(ctx, s.foreign)
	return first, nil
}

// stopAmends waits for the amendments in flight (the host's context is
// cancelled first, so they end at once).
func (s *slot) stopAmends() { s.amendWG.Wait() }
