package coordinator

import (
	"context"
	"slices"
	"strings"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Fleet pauses (control.go): how a pause in force reaches the isolates
// (decorate: an upstream pause in each reply that names a paused key) and
// how a resume lifts it there (reset notices of the keys told, or in
// shared mode resets in the replies to the batches that name them).

// maxPauseTold bounds the keys per paused limiter the coordinator
// remembers telling of the pause (for the notices of a resume): half of
// the Merger's reset log, so that a resume fits it.
const maxPauseTold = 2048

// pauseIndex is the pauses in force, for the replies (immutable).
type pauseIndex struct {
	limiters map[string]int64    // limiter -> until (ns)
	keys     map[[2]string]int64 // (limiter, key) -> until (ns)
	end      int64               // the last until, ns
}

// until returns when (limiter, key)'s pause ends (0: none) and whether the
// limiter's pause is the one that ends last.
func (p *pauseIndex) until(limiter, key string) (int64, bool) {
	l := p.limiters[limiter]
	k := p.keys[[2]string{limiter, key}]
	return max(l, k), l > k
}

// decorate adds to rp, the reply to b made at now, the pause of every
// entry's limiter or key in force (full-window notices aside) (an upstream pause the isolate honours)
// and, in shared mode, a reset of each key whose pause was lifted within
// liftWindow that b names without cost: an isolate that denies the key
// from the pause it holds names it so (wasm/core/resets.go, recheck), and
// the reset drops that pause before the reply's view applies.
func (ct *control) decorate(b *wire.Batch, rp *wire.Reply, now int64) {
	if rp == nil {
		return
	}
	if ct.liftEnd.Load() > now {
		ct.resetLifted(b, rp, now)
	}
	ps := ct.active.Load()
	if ps == nil || ps.end <= now {
		return
	}
	// Every limiter paused as a whole, in every reply (wire/pause.go): the
	// isolate denies its keys not named here too.
	for name, until := range ps.limiters {
		if until > now {
			rp.Paused = append(rp.Paused, wire.LimiterPause{Limiter: name, Left: until - now})
		}
	}
	slices.SortFunc(rp.Paused, func(a, b wire.LimiterPause) int { return strings.Compare(a.Limiter, b.Limiter) })
	var ups map[[2]string]int // index of rp.Upstream, made at the first paused key
	for i := range rp.Entries {
		v := &rp.Entries[i]
		if v.Notice() {
			// A full-window notice names a key of any isolate, maybe of
			// another client: its pause is not this reply's to tell (an
			// edge token that may not read learnt other clients' key
			// names from it; principal.grantedViews drops the notice
			// itself). A limiter paused as a whole is in rp.Paused.
			continue
		}
		until, byLimiter := ps.until(v.Limiter, v.Key)
		if until <= now {
			continue
		}
		left := until - now
		if !ct.notices || byLimiter && !ct.tell(v.Limiter, v.Key) {
			left = min(left, int64(ControlPauseChunk))
		}
		if ups == nil {
			// A map, not a search per view: a limiter's pause names
			// every key of a batch (8,192 searches of up to 8,192 views
			// took 154 ms a batch; BenchmarkDecoratePaused).
			ups = make(map[[2]string]int, len(rp.Upstream))
			for j := range rp.Upstream {
				ups[[2]string{rp.Upstream[j].Limiter, rp.Upstream[j].Key}] = j
			}
		}
		k := [2]string{v.Limiter, v.Key}
		j, ok := ups[k]
		if !ok {
			rp.Upstream = append(rp.Upstream, wire.UpView{Limiter: v.Limiter, Key: v.Key})
			j = len(rp.Upstream) - 1
			ups[k] = j
		}
		rp.Upstream[j].Pause = max(rp.Upstream[j].Pause, left)
	}
	capUpstream(rp)
}

// capUpstream keeps rp within the upstream views a module reads
// (wire.MaxBatchEntries): a pause adds a view per paused entry after the
// merge bounded them, so a batch of paused entries and signals of other
// keys could pass the bound, and the module would refuse the whole reply
// (and get it again for its resent batch while the pause lasts). Views of
// the reply's entries stay (there are at most MaxBatchEntries); views of
// other keys (signals) are dropped first: they are told again with a
// later reply.
func capUpstream(rp *wire.Reply) {
	if len(rp.Upstream) <= wire.MaxBatchEntries {
		return
	}
	named := make(map[[2]string]bool, len(rp.Entries))
	for i := range rp.Entries {
		named[[2]string{rp.Entries[i].Limiter, rp.Entries[i].Key}] = true
	}
	kept := rp.Upstream[:0]
	room := wire.MaxBatchEntries - len(named)
	for _, u := range rp.Upstream {
		switch {
		case named[[2]string{u.Limiter, u.Key}]:
		case room > 0:
			room--
		default:
			continue
		}
		kept = append(kept, u)
	}
	rp.Upstream = kept
}

// pauseOf returns the fleet pause in force at now for (limiter, key): the
// one that ends last of the limiter's and the key's, or nil.
func (ct *control) pauseOf(limiter, key string, now int64) *Pause {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	var best *Pause
	for _, p := range ct.rec.Pauses {
		if p.Limiter != limiter || len(p.Key) > 0 && string(p.Key) != key || p.Until <= now {
			continue
		}
		if best == nil || p.Until > best.Until {
			best = &Pause{Limiter: p.Limiter, Key: string(p.Key), KeyB64: keyB64(p.Key), Until: p.Until, Left: p.Until - now, Reason: p.Reason, By: p.By, At: p.At}
		}
	}
	return best
}

// resetLifted adds to rp a reset of each key b names only without cost
// (no Delta, no Demand) whose pause was lifted within liftWindow of now.
func (ct *control) resetLifted(b *wire.Batch, rp *wire.Reply, now int64) {
	costly := map[[2]string]bool{}
	for i := range b.Entries {
		e := &b.Entries[i]
		k := [2]string{e.Limiter, e.Key}
		costly[k] = costly[k] || e.Delta != 0 || e.Demand != 0
	}
	for k, c := range costly {
		if c || !ct.lifted(k[0], k[1], now) || len(rp.Resets) >= wire.MaxBatchEntries {
			continue
		}
		rp.Resets = append(rp.Resets, wire.ResetKey{Limiter: k[0], Key: k[1]})
	}
}

// tell notes that key was told of limiter's pause and reports whether a
// resume will send it a notice (false: maxPauseTold keys noted already).
func (ct *control) tell(limiter, key string) bool {
	ct.toldMu.Lock()
	defer ct.toldMu.Unlock()
	ks := ct.told[limiter]
	if ks == nil {
		ks = map[string]bool{}
		ct.told[limiter] = ks
	}
	if ks[key] {
		return true
	}
	if len(ks) >= maxPauseTold {
		return false
	}
	ks[key] = true
	return true
}

// takeTold returns and forgets the keys told of limiter's pause.
func (ct *control) takeTold(limiter string) []string {
	ct.toldMu.Lock()
	defer ct.toldMu.Unlock()
	var keys []string
	for k := range ct.told[limiter] {
		keys = append(keys, k)
	}
	delete(ct.told, limiter)
	slices.Sort(keys)
	return keys
}

// liftPauses lifts, at the isolates, the pauses of old that rec ended or
// shortened: with reset notices of the keys told, or, in shared mode (no
// notices), by naming each lifted key in the Resets of the replies to
// batches that name it without cost (liftWindow).
func (c *Coordinator) liftPauses(old, rec *controlRecord) {
	ct, now := c.ctl, c.opts.Clock.Now()
	var keys [][2]string
	var targets [][2]string
	for _, p := range old.Pauses {
		i := slices.IndexFunc(rec.Pauses, func(q pauseRecord) bool { return q.Limiter == p.Limiter && string(q.Key) == string(p.Key) })
		if i >= 0 && rec.Pauses[i].Until >= p.Until {
			continue
		}
		targets = append(targets, [2]string{p.Limiter, string(p.Key)})
		if len(p.Key) > 0 {
			keys = append(keys, [2]string{p.Limiter, string(p.Key)})
			continue
		}
		for _, k := range ct.takeTold(p.Limiter) {
			// Not a key still paused on its own: the notice makes the
			// edge forget the key's pause with the limiter's, and an
			// approximate edge then admitted it until its next reply.
			if !pausedKey(rec, p.Limiter, k, now) {
				keys = append(keys, [2]string{p.Limiter, k})
			}
		}
	}
	if len(targets) == 0 {
		return
	}
	if !ct.notices {
		ct.lift(targets, now)
		return
	}
	c.do(context.Background(), func(m *merge.Merger, now int64) error {
		for _, k := range keys {
			m.Notice(k[0], k[1], now)
		}
		return nil
	})
}

// pausedKey reports whether rec pauses (limiter, key) on its own at now.
func pausedKey(rec *controlRecord, limiter, key string, now int64) bool {
	return slices.ContainsFunc(rec.Pauses, func(q pauseRecord) bool {
		return q.Limiter == limiter && string(q.Key) == key && q.Until > now
	})
}

// liftWindow is how long after a pause is lifted in shared mode the
// replies name its keys in their Resets: ControlPauseChunk, the most of
// the pause an isolate holds from its last reply.
const liftWindow = ControlPauseChunk

// lift notes at now that the pauses of targets ((limiter, key), key ""
// for a limiter's) were lifted (shared mode: decorate names their keys).
func (ct *control) lift(targets [][2]string, now int64) {
	ct.liftMu.Lock()
	defer ct.liftMu.Unlock()
	next := map[[2]string]int64{}
	if cur := ct.lifts.Load(); cur != nil {
		for t, until := range *cur {
			if until > now {
				next[t] = until
			}
		}
	}
	for _, t := range targets {
		next[t] = now + int64(liftWindow)
	}
	ct.lifts.Store(&next)
	ct.liftEnd.Store(now + int64(liftWindow))
}

// lifted reports whether a pause of limiter or of its key was lifted
// within liftWindow of now (shared mode).
func (ct *control) lifted(limiter, key string, now int64) bool {
	ls := ct.lifts.Load()
	if ls == nil {
		return false
	}
	return (*ls)[[2]string{limiter, ""}] > now || (*ls)[[2]string{limiter, key}] > now
}

// saveTold writes, at Close (not in shared mode: no notices there), the
// keys told of a limiter's pause in force with the control record, so that
// a resume after the restart sends their notices. A crash loses them: the
// isolates told then keep the pause until it ends (at most the limiter's
// max_pause, which the module applies).
func (c *Coordinator) saveTold() error {
	ct := c.ctl
	if !ct.notices {
		return nil
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	now := c.opts.Clock.Now()
	rec := ct.rec.clone()
	rec.Told = nil
	ct.toldMu.Lock()
	for _, p := range rec.Pauses {
		if len(p.Key) > 0 || p.Until <= now || len(ct.told[p.Limiter]) == 0 {
			continue
		}
		if rec.Told == nil {
			rec.Told = map[string][][]byte{}
		}
		for k := range ct.told[p.Limiter] {
			rec.Told[p.Limiter] = append(rec.Told[p.Limiter], []byte(k))
		}
	}
	ct.toldMu.Unlock()
	if rec.Told == nil {
		return nil
	}
	_, err := ct.store.save(context.Background(), rec.Gen, &rec)
	return err
}
