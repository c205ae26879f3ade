package host

import (
	"context"
	"errors"
	"slices"

	"github.com/edgelimit/edgelimit/edge/syncloop"
)

// Amendments (wasm/wire/amend.go). A request the isolate answers SyncRetry
// while a batch is in flight would wait for that batch's reply and then
// for the next batch's: two round trips. The slot sends an amendment of
// the batch instead, at once, next to the batch, and applies both replies,
// whichever comes first (applyReply). The loop cuts the next batch as
// usual: the module takes an amendment's reply while that batch is in
// flight too. A held request that no attempt in flight asks for asks at
// once, as in the simulator (syncloop.NextAsk): in an amendment of the
// batch in flight, up to syncloop.MaxAmends of it, else in the next batch
// (ask).

// amendment is one on its way: of the batch answered as the batch-th,
// cut as the cut-th (slot.cuts), by the inc-th incarnation of the isolate
// (slot.inc), with the slot's id for it.
type amendment struct {
	batch, cut int64
	id, inc    uint64
}

// skewTally counts the amendments sent of one cut (slot.cuts) and those
// the coordinator refused for their times (400 clock_skew): when the
// batch is refused for its times too, it is taken back only if every one
// of them was (lockedModule.Recall; an amendment applied, or whose answer
// was lost, may have counted the batch).
type skewTally struct {
	cut           int64
	sent, refused int
}

// ask makes an attempt in flight ask, at now, for a request held (SyncRetry)
// when the slot had cut held batches (cuts then, read after its decision)
// whose amendment is mine (0: none), and returns the amendment it sent, or
// mine. The batch in flight asks for it when it was cut after the request
// was held, and its amendment while on its way; else it asks at once
// (syncloop.NextAsk): in an amendment of the batch in flight, or in the
// next batch (a kick of the loop). It waits for a reply otherwise.
func (s *slot) ask(now, held int64, mine uint64) uint64 {
	if s.loop == nil {
		return mine
	}
	at := s.attemptAt.Load()
	if at != 0 && s.cuts.Load() > held {
		return mine
	}
	s.amendMu.Lock()
	flying := mine != 0 && slices.ContainsFunc(s.amends, func(a amendment) bool { return a.id == mine })
	n := s.lastAmends(at != 0)
	s.amendMu.Unlock()
	if flying {
		return mine
	}
	switch syncloop.NextAsk(at != 0, n) {
	case syncloop.AskAmend:
		if id := s.amend(now); id != 0 {
			return id
		}
	case syncloop.AskBatch:
		s.loop.Kick()
	}
	return mine
}

// want kicks the loop for a sync the module asked for (not for a held
// request: see ask), unless the next batch must wait for a reply of the
// last one's amendments (syncloop.NextAsk).
func (s *slot) want() {
	at := s.attemptAt.Load()
	s.amendMu.Lock()
	n := s.lastAmends(at != 0)
	s.amendMu.Unlock()
	if syncloop.NextAsk(false, n) == syncloop.AskBatch {
		s.loop.Kick()
	}
}

// lastAmends returns how many amendments of the slot's last batch (the
// one in flight when inFlight, else the one answered last) are on their
// way. amendMu is held.
func (s *slot) lastAmends(inFlight bool) int {
	b := s.batches.Load()
	if inFlight {
		b++
	}
	n := 0
	for _, a := range s.amends {
		if a.batch == b {
			n++
		}
	}
	return n
}

// amend sends, for a request decided SyncRetry at now, an amendment of the
// slot's batch in flight, and returns its id: 0 when none was sent (no
// batch in flight, syncloop.MaxAmends of it on their way, or nothing new
// to ask).
func (s *slot) amend(now int64) uint64 {
	if s.tr == nil || s.ctx == nil || s.ctx.Err() != nil || s.attemptAt.Load() == 0 {
		return 0
	}
	// The batch in flight is the one answered next: batches+1, read under
	// the module's lock with the amendment made (a reply applied and the
	// next batch cut in between would make it amend that one).
	s.amendMu.Lock()
	if s.lastAmends(true) >= syncloop.MaxAmends {
		s.amendMu.Unlock()
		return 0
	}
	s.mu.Lock()
	a := amendment{batch: s.batches.Load() + 1, cut: s.cuts.Load(), inc: s.inc}
	out, err := s.iso.Amend(s.ctx, now, nil)
	s.mu.Unlock()
	if err != nil || len(out) == 0 {
		s.amendMu.Unlock()
		return 0
	}
	s.amendID++
	a.id = s.amendID
	s.amends = append(s.amends, a)
	if s.tally.cut != a.cut {
		s.tally = skewTally{cut: a.cut}
	}
	s.tally.sent++
	s.amendMu.Unlock()
	s.amendWG.Add(1)
	go s.sendAmend(out, a)
	return a.id
}

// amendDone records that amendment a is no longer on its way, refused for
// its times (skew) or not.
func (s *slot) amendDone(a amendment, skew bool) {
	s.amendMu.Lock()
	s.amends = slices.DeleteFunc(s.amends, func(x amendment) bool { return x.id == a.id })
	if skew && s.tally.cut == a.cut && a.inc == s.inc {
		s.tally.refused++
	}
	if s.amendEnd != nil {
		close(s.amendEnd)
		s.amendEnd = nil
	}
	s.amendMu.Unlock()
}

// waitAmends waits until no amendment of the cut-th batch is on its way
// (each ends within the transport's timeout, or with ctx).
func (s *slot) waitAmends(ctx context.Context, cut int64) {
	for {
		s.amendMu.Lock()
		if settled, _ := s.amendsSettled(cut); settled {
			s.amendMu.Unlock()
			return
		}
		if s.amendEnd == nil {
			s.amendEnd = make(chan struct{})
		}
		ch := s.amendEnd
		s.amendMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// amendsSettled reports whether no amendment of the cut-th batch is on its
// way, and whether every one sent was refused for its times. amendMu is
// held.
func (s *slot) amendsSettled(cut int64) (settled, refused bool) {
	if slices.ContainsFunc(s.amends, func(a amendment) bool { return a.cut == cut }) {
		return false, false
	}
	return true, s.tally.cut != cut || s.tally.refused == s.tally.sent
}

// sendAmend posts the amendment out, a, (the batches answered count once
// its batch is) and applies its reply. A failed amendment is not a failed
// sync: its requests wait for a reply of a batch, which the loop is asked
// for.
func (s *slot) sendAmend(out []byte, a amendment) {
	defer s.amendWG.Done()
	r, err := s.tr.Sync(s.ctx, out, nil)
	s.amendDone(a, errors.Is(err, syncloop.ErrClockSkew)) // before the reply wakes the held requests: those it does not admit ask again
	if err == nil {
		_, err = s.applyReply(s.ctx, r, s.clk.Now(), a.batch, a.inc)
	}
	if err != nil && s.loop != nil {
		s.want()
	}
}

// applyReply applies at now a reply of the slot's batch (b 0) or of an
// amendment of batch b sent by incarnation inc (see amend: one of an
// earlier incarnation is void, nothing is applied: see
// lockedModule.Reincarnate). first reports that it was the first
// applied for the batch in flight (it ends the attempt); another brings
// views and leases only (the module refuses it with core.ErrStaleReply
// once the reply of the batch after is applied, or when it is older than
// the first).
func (s *slot) applyReply(ctx context.Context, reply []byte, now, b int64, inc uint64) (first bool, err error) {
	s.mu.Lock()
	if b != 0 && inc != s.inc { // inc is written under mu too
		s.mu.Unlock()
		return false, nil
	}
	// The batch's own reply is its first in its attempt; an amendment's
	// of the batch no reply was applied to is, also after the batch's
	// attempt failed (its reply was lost, or came after the amendment's):
	// the module takes it as the batch's, so the next batch is a new cut.
	first = b == 0 && s.attemptAt.Load() != 0 || b != 0 && b == s.batches.Load()+1 && s.unanswered
	err = s.iso.SyncIn(ctx, reply, now)
	if err == nil && first {
		inFlight := s.attemptAt.Swap(0) != 0
		switch {
		case b == 0:
		case inFlight:
			// The attempt's failure is no failed sync (Answered), and the
			// loop need not wait for its own reply.
			s.answered.Store(true)
			if s.loop != nil {
				s.loop.EndAttempt()
			}
		case s.loop != nil:
			s.loop.Recovered(now) // the attempt failed before: no backoff
		}
		s.batches.Add(1)
		s.unanswered = false
	}
	s.mu.Unlock()
	if err != nil {
		return first, err
	}
	s.lastOK.Store(now)
	s.lastReply.Store(s.baseTime(now))
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
