package merge

import (
	"context"
	"fmt"
	"time"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Counting (shared mode): the keys of approximate windowed limiters are
// plain counters. Their state is the count of the newest window, of the
// one before, and the isolate sketch; adding a delta to it commutes with
// every other add, so nothing needs to be read first, merged in the
// coordinator or checked against a version: a CountingStore adds each
// bucket's deltas in place (one atomic step per bucket that also checks
// and sets each isolate's mark there: a part already applied is skipped,
// so a retried batch never counts twice) and answers with the keys' new
// state, from which the coordinator computes the views. Strict and auto
// limiters (leases), token buckets and GCRA (the bucket's arrival time is
// not a sum), limiters that follow an upstream and periods under
// countMinPeriod keep the read-merge-write path (shared.go).

// CountingStore is a SharedStore that also keeps counter records (see
// above): SharedMerger uses AddCounts for the keys of countable limiters.
type CountingStore interface {
	SharedStore
	// AddCounts performs each CountWrite atomically (each on its own) and
	// returns their outcomes, in order, and an error when any is SubFailed
	// or SubUnconfirmed (outcomes is then still one per CountWrite).
	AddCounts(ctx context.Context, ws []CountWrite) ([]CountOutcome, error)
}

// Counter is the record of a key of a countable limiter in a
// CountingStore: Count in window Win, Prev in Win-1 (cost units), and the
// isolate sketch (period index Epoch, bitmaps Cur of Epoch and Last of
// Epoch-1; bit b of a bitmap is bit b%64 of word b/64).
type Counter struct {
	Win, Count, Prev int64
	Epoch            int64
	Cur, Last        [4]uint64
}

// CountWrite is one bucket's counting part of a group: every part whose
// isolate's mark in Bucket is below its Seq is applied (its adds, its
// sketch bit on the keys it adds to) and sets the mark; the others only
// renew their mark's TTL (a write: a store that waits for replicas
// confirms the earlier attempt that applied them). Then every key of Keys
// that changed is stored with its TTL.
type CountWrite struct {
	Bucket int
	Keys   []CountKey
	Parts  []CountPart
}

// CountKey is a key of a CountWrite.
type CountKey struct {
	Key   []byte // storage key
	Epoch int64  // the sketch's period index at the coordinator's now: limitmath.Window(now, period)
	// TTL is how long the record lives after the write, ns: until the
	// newest window the write can leave it at (the current one or the
	// next, as the batches' windows are bounded: checkTimes) is older
	// than the previous one, plus one period and sharedTTLMargin (as
	// sharedTTL).
	TTL int64
}

// CountPart is one isolate's part of a CountWrite.
type CountPart struct {
	Mark MarkSet // the isolate's mark in the bucket: Isolate, Seq, TTL
	Bit  int     // the isolate's sketch bit, 0-255
	Adds []CountAdd
}

// CountAdd adds Delta (cost units, 0 to wire.MaxLimit) to window Window of
// the key Keys[Key]: the record rolls to Window when it is newer
// (limitmath.Roll); an add to a window older than Win-1 is stale (dropped,
// counted).
type CountAdd struct {
	Key           int
	Window, Delta int64
}

// CountOutcome is what a CountWrite did: Outcome is SubApplied,
// SubFailed or SubUnconfirmed (applied, not confirmed durable). When
// applied, Dup says per part whether it was skipped (its mark was at its
// Seq already), Stale per part how many of its adds were stale, and
// Counters holds every key's record after the write (a zero Counter for
// a key absent).
type CountOutcome struct {
	Outcome  SubOutcome
	Dup      []bool
	Stale    []int64
	Counters []Counter
}

// countMinPeriod is the shortest period of a countable limiter: 1 ms, so
// that window indexes stay far below 2^53 (a store may do the counting in
// double-precision numbers: Redis's Lua does).
const countMinPeriod = int64(time.Millisecond)

// countable reports whether the keys of lim are counters.
func countable(lim *wire.LimiterConfig) bool {
	return !lim.Leased() && !lim.IsBucket() && lim.Upstream == nil && lim.Period >= countMinPeriod
}

// seedCounter puts the state of c in m's cache, as the record of skey.
func (m *Merger) seedCounter(lim *wire.LimiterConfig, skey string, c *Counter) *keyState {
	st := newKeyState(lim, skey)
	st.win, st.count, st.prev = c.Win, c.Count, c.Prev
	st.sk = isoSketch{epoch: c.Epoch, cur: c.Cur, prev: c.Last}
	m.cacheKey(skey, st)
	return st
}

// countLimiter returns the limiter of the storage key k (from m's
// configuration; nil when none), without copying k.
func (m *Merger) countLimiter(k string) *wire.LimiterConfig {
	if len(k) < 2 || k[0] != prefixKey || len(k) < 2+int(k[1]) {
		return nil
	}
	return m.lims[k[2:2+int(k[1])]]
}

// addCounts writes the counting buckets gs (parts of the batches that
// passed the sequence rules) in one CountingStore call and answers each
// batch from the keys' new state (one view computation per batch, over
// every bucket it counted in). A failed or unconfirmed bucket fails the
// batches with a part in it (ErrUnavailable: retried, nothing counted
// twice).
func (s *SharedMerger) addCounts(ctx context.Context, m *Merger, gs []*sharedBucket, now int64) {
	cs := s.store.(CountingStore)
	ws := make([]CountWrite, len(gs))
	parts := make([][]*sharedSub, len(gs)) // the subs of ws[i].Parts, in order
	nkeys := 0
	var idx map[string]int
	var periods, newest []int64
	var buf []byte
	for gi, g := range gs {
		w := &ws[gi]
		w.Bucket = g.bucket
		w.Keys = make([]CountKey, len(g.keys))
		nkeys += len(g.keys)
		if idx == nil {
			idx = make(map[string]int, len(g.keys))
		} else {
			clear(idx)
		}
		// Per key: its period and the newest window it can hold after the
		// write.
		periods, newest = periods[:0], newest[:0]
		for j, k := range g.keys {
			P := m.countLimiter(k).Period
			idx[k] = j
			cur := limitmath.Window(now, P)
			periods, newest = append(periods, P), append(newest, cur)
			w.Keys[j] = CountKey{Key: []byte(k), Epoch: cur}
		}
		for _, sb := range g.subs {
			r := sb.req
			if r.dup {
				continue // applied before: answered from the keys' state
			}
			p := CountPart{Mark: MarkSet{Isolate: r.iso, Seq: r.b.Seq, TTL: m.sharedMarkTTL(sb.entries, now, int64(s.opts.IsolateTTL))},
				Bit: int(r.h.hash & (sketchBits - 1)), Adds: make([]CountAdd, len(sb.entries))}
			for i, e := range sb.entries {
				buf = appendKeyStorageKey(buf[:0], e.Limiter, e.Key)
				j := idx[string(buf)]
				cw := countWindow(m.lims[e.Limiter], -1, e.Window, now)
				p.Adds[i] = CountAdd{Key: j, Window: cw, Delta: e.Delta}
				newest[j] = max(newest[j], cw)
			}
			w.Parts = append(w.Parts, p)
			parts[gi] = append(parts[gi], sb)
		}
		// A record's window is at most the newest of its adds and the
		// current one, or (written meanwhile by another coordinator) the
		// next: its TTL for the newest of the adds and the current one
		// covers that one too, less a period (sharedTTL counts one more).
		for j := range w.Keys {
			P := periods[j]
			w.Keys[j].TTL = addSat(max(addSat(newest[j], 2)*P-now, 0), addSat(P, sharedTTLMargin))
		}
	}
	outs, err := cs.AddCounts(ctx, ws)
	if len(outs) != len(ws) {
		for _, g := range gs {
			for _, sb := range g.subs {
				sb.req.err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
		}
		return
	}
	// Every bucket applied seeds m with its keys' new state (the buckets'
	// keys are distinct), and records which of its parts were skipped.
	var written MergeStats
	m.resetShared()
	m.keys, m.keyWeight = make(map[string]*keyState, nkeys), 0
	dup := map[*sharedSub]bool{}
	for gi, g := range gs {
		o := &outs[gi]
		if o.Outcome != SubApplied {
			for _, sb := range g.subs {
				sb.req.err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			if o.Outcome != SubUnconfirmed {
				continue
			}
		}
		for pi, sb := range parts[gi] {
			if pi < len(o.Dup) && o.Dup[pi] {
				dup[sb] = true
				continue
			}
			sb.applied = MergeStats{DeltasApplied: int64(len(sb.entries))}
			if pi < len(o.Stale) {
				sb.applied.DeltasStale = o.Stale[pi]
			}
			written.DeltasApplied += sb.applied.DeltasApplied
			written.DeltasStale += sb.applied.DeltasStale
		}
		if o.Outcome != SubApplied {
			continue
		}
		if len(o.Counters) != len(g.keys) {
			for _, sb := range g.subs {
				sb.req.err = fmt.Errorf("%w: the store answered %d counters for %d keys", ErrUnavailable, len(o.Counters), len(g.keys))
			}
			continue
		}
		for j, k := range g.keys {
			m.seedCounter(m.countLimiter(k), k, &o.Counters[j])
		}
	}
	// The views: each batch answered as a retry (nothing applied in the
	// Merger) on the state the store answered, which holds its adds and
	// sketch bit already, once over all its counted parts (its first
	// counted part holds the views, the others none: reply puts the
	// entries back in the batch's order).
	var reqs []*sharedReq
	counted := map[*sharedReq][]*sharedSub{}
	for _, g := range gs {
		for _, sb := range g.subs {
			r := sb.req
			if counted[r] == nil {
				reqs = append(reqs, r)
			}
			counted[r] = append(counted[r], sb)
		}
	}
	var entries []wire.Delta
	for _, r := range reqs {
		if r.err != nil {
			continue // a bucket of it failed
		}
		subs := counted[r]
		es := subs[0].entries
		if len(subs) > 1 {
			entries = entries[:0]
			for _, sb := range subs {
				entries = append(entries, sb.entries...)
			}
			es = entries
		}
		m.hwms[r.iso] = &hwmState{id: r.iso, hash: r.h.hash, seq: r.b.Seq} // sum 0: a retry of whatever took the number
		rp, err := m.ApplyAs(&wire.Batch{Version: r.b.Version, Isolate: r.b.Isolate, Seq: r.b.Seq, At: r.b.At, Entries: es, Limits: r.b.Limits, Spans: r.b.Spans, Pace: r.b.Pace}, r.scope, now, nil)
		if err != nil {
			r.err = err
			continue
		}
		for i, sb := range subs {
			if i == 0 {
				sb.rp = rp
			} else {
				sb.rp = &wire.Reply{}
			}
			if dup[sb] {
				sb.applied = MergeStats{}
			}
		}
	}
	m.resetShared()
	// Counted once written, whether or not the rest of the batch is.
	s.addStats(func(t *MergeStats) {
		t.DeltasApplied += written.DeltasApplied
		t.DeltasStale += written.DeltasStale
	})
}
