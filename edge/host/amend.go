package host

import (
	"context"
)

// Amendments (wasm/wire/amend.go). A request the isolate answers SyncRetry
// while a batch is in flight would wait for that batch's reply and then
// for the next batch's: two round trips. The slot sends an amendment of
// the batch instead, at once, next to the batch (one per batch), and
// applies both replies, whichever comes first (applyReply). The loop cuts
// the next batch as usual: the module takes the amendment's reply while
// that batch is in flight too.

// amend sends, for a request decided SyncRetry at now, an amendment of the
// slot's batch in flight, and reports whether it did: not when no batch is
// in flight, the batch was amended already, or the isolate has nothing new
// to ask.
func (s *slot) amend(now int64) bool {
	if s.tr == nil || s.ctx == nil || s.ctx.Err() != nil || s.attemptAt.Load() == 0 {
		return false
	}
	// The batch in flight is the one answered next: batches+1.
	b := s.batches.Load() + 1
	if old := s.amendOf.Load(); old == b || !s.amendOf.CompareAndSwap(old, b) {
		return false
	}
	s.mu.Lock()
	out, err := s.iso.Amend(s.ctx, now, nil)
	s.mu.Unlock()
	if err != nil || len(out) == 0 {
		s.amendOf.CompareAndSwap(b, 0)
		return false
	}
	s.amendWG.Add(1)
	go s.sendAmend(out, b)
	return true
}

// sendAmend posts the amendment out of batch b (the batches answered
// count once it is) and applies its reply. A failed amendment is not a
// failed sync: its requests wait for a reply of a batch, which the loop is
// asked for.
func (s *slot) sendAmend(out []byte, b int64) {
	defer s.amendWG.Done()
	r, err := s.tr.Sync(s.ctx, out, nil)
	s.amendOf.CompareAndSwap(b, 0) // before the reply wakes the held requests: those still held ask in the next batch
	if err == nil {
		_, err = s.applyReply(s.ctx, r, s.clk.Now(), b)
	}
	if err != nil && s.loop != nil {
		s.loop.Kick()
	}
}

// applyReply applies at now a reply of the slot's batch (b 0) or of an
// amendment of batch b (see amend). first reports that it was the first
// applied for the batch in flight (it ends the attempt); another brings
// views and leases only (the module refuses it with core.ErrStaleReply
// once the reply of the batch after is applied, or when it is older than
// the first).
func (s *slot) applyReply(ctx context.Context, reply []byte, now, b int64) (first bool, err error) {
	s.mu.Lock()
	first = s.attemptAt.Load() != 0 && (b == 0 || b == s.batches.Load()+1)
	err = s.iso.SyncIn(ctx, reply, now)
	if err == nil && first {
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
