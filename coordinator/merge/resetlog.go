package merge

import (
	"sort"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Reset notices (wire/resets.go): a reset must reach every isolate, also
// those that no longer sync the key because they deny it from what they
// cached (a dry spell, a full window, an upstream pause). The Merger
// numbers its resets with a generation (ns of its clock, increasing) and
// keeps the last maxResetLog of them in memory; each reply tells the
// isolate the current generation (wire.Reply.ResetGen) and the keys reset
// since the generation its batch names (wire.Reply.Resets). When it cannot
// list them (the isolate's generation predates the log: this process's
// start, or entries dropped since) it says ResetAll, and the isolate drops
// the dry spells and fleet limits of every key. The log is not durable: a
// restart costs every isolate one ResetAll, which only makes it ask
// again where it would have waited. In shared mode (Redis) replies carry
// no generation: a reset reaches the isolates that sync the key, which an
// isolate denying from its cache does within two sync intervals of its
// last reply (wasm/core/resets.go, recheck).

// maxResetLog bounds the resets the Merger remembers (about 100 bytes
// each): an isolate further behind is told ResetAll.
const maxResetLog = 4096

// resetLog is the Merger's log of recent resets, oldest first.
type resetLog struct {
	floor int64 // an isolate whose generation is below it may have missed a reset no longer listed
	gen   int64 // the newest generation (>= floor); 0 until first used
	ents  []resetEnt
}

type resetEnt struct {
	gen          int64
	limiter, key string
}

// start sets the log's floor and generation to now on first use.
func (l *resetLog) start(now int64) {
	if l.gen == 0 {
		l.floor, l.gen = max(now, 1), max(now, 1)
	}
}

// add logs a reset of (limiter, key) at now (ns; 0 when unknown: the next
// generation).
func (l *resetLog) add(limiter, key string, now int64) {
	l.start(now)
	l.gen = max(now, l.gen+1)
	l.ents = append(l.ents, resetEnt{l.gen, limiter, key})
	if len(l.ents) > maxResetLog {
		l.floor = l.ents[0].gen
		l.ents = append(l.ents[:0], l.ents[1:]...)
	}
}

// ResetAt is Reset (see admin.go), noticed to the isolates with
// generation now (ns): every isolate hears of it with its next reply,
// whichever keys its batch names.
func (m *Merger) ResetAt(limiter, key string, now int64) error {
	if err := m.Reset(limiter, key); err != nil {
		return err
	}
	m.resets.add(limiter, key, now)
	m.forgetFull(limiter, key)
	return nil
}

// finishReply adds the reset notices for a batch that applied generation
// rg to rp, made at now. An isolate that never sent a generation (rg 0) is
// new or older than reset notices: it gets the generation only, and
// UpViews without a life (an older module reads 7 elements only).
func (m *Merger) finishReply(rp *wire.Reply, rg, now int64) {
	l := &m.resets
	l.start(now)
	if !m.opts.NoResetNotices {
		rp.ResetGen = l.gen
	}
	if rg == 0 || m.opts.NoResetNotices {
		for i := range rp.Upstream {
			rp.Upstream[i].Life = 0
		}
		return
	}
	if rg > l.gen || rg < l.floor {
		rp.ResetAll = true // from another process, or further behind than the log
		return
	}
	i := sort.Search(len(l.ents), func(i int) bool { return l.ents[i].gen > rg })
	if len(l.ents)-i > wire.MaxBatchEntries {
		rp.ResetAll = true
		return
	}
	for ; i < len(l.ents); i++ {
		rp.Resets = append(rp.Resets, wire.ResetKey{Limiter: l.ents[i].limiter, Key: l.ents[i].key})
	}
}

// Notice tells every isolate, with its next reply, to drop what it cached
// of (limiter, key) as after a reset (its counts, lease, upstream pause and
// fleet limit: wasm/core/resets.go, forget) without resetting anything
// here: the next view of the key brings the counts back. The coordinator
// uses it to lift an operator's pause the isolates hold (control.go).
func (m *Merger) Notice(limiter, key string, now int64) {
	m.resets.add(limiter, key, now)
	m.forgetFull(limiter, key)
}
