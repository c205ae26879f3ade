package merge

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Shared mode: several coordinators over one SharedStore (Redis Cluster,
// redis.go). A Merger whose cache is authoritative cannot be shared by two
// processes, so in shared mode no state outlives a group of batches in a
// coordinator: each group is merged by the same Merger code (Apply, leases)
// on the states read from the store for it, and written back with
// optimistic concurrency.
//
// The keys are spread over SharedStore buckets (a bucket is one Redis hash
// slot, through a hash tag). As the Pebble coordinator group-commits, a
// shared coordinator takes the batches that arrived together (at most one
// per isolate) as one group and cuts them into one part per bucket. Each
// part is read (its keys with their versions, and each isolate's mark in
// that bucket), merged (the isolates' sub-batches one after the other, in
// arrival order), and written by one atomic conditional write that
//
//   - applies nothing when an isolate's mark in the bucket is already at
//     its batch's Seq (another coordinator applied it: at most once per
//     (isolate, Seq) in every bucket, so across the whole batch), and
//   - applies nothing when any key's version changed since the read (a
//     concurrent group of another coordinator);
//
// the part is then read and merged again, up to sharedAttempts times. So
// two coordinators serving one key never lose an update, and a strict
// lease is granted only against the state it was computed on: strict never
// exceeds the limit. The sequence rules (sequence.go) are checked against
// the isolate's global high-water mark, advanced (never moved back) once
// every part of its batch is written; a coordinator that dies between the
// two leaves the mark behind, and the retry of the batch (to any
// coordinator) finds every bucket already applied and only advances it.
//
// Approximate limiters' isolate sketches (sketch.go) are stored with the
// key's state, so View.Isolates counts the isolates of every coordinator.

// SharedStore is a Store that several coordinators share: Open runs a
// Coordinator over it in shared mode. Its Get returns key records without
// their version; Commit is used only for deletes.
type SharedStore interface {
	Store
	// Bucket returns the bucket of a key record's storage key.
	Bucket(key []byte) int
	// ReadShared returns, in one round trip per master, the records of
	// keys with their versions, the Seq of each mark (0: none), and the
	// high-water mark records of isolates (scoped ids; nil: none).
	ReadShared(ctx context.Context, keys [][]byte, marks []MarkRef, isolates []string) ([]Versioned, []int64, [][]byte, error)
	// WriteShared performs each SubWrite atomically (each on its own) and
	// returns their outcomes, in order, and an error when any is SubFailed
	// or SubUnconfirmed (outcomes is then still one per SubWrite).
	WriteShared(ctx context.Context, subs []SubWrite) ([]SubOutcome, error)
	// AdvanceMarks sets each isolate's high-water mark record to its Value
	// (with a TTL of TTL ns) unless it already holds a Seq >= Seq.
	AdvanceMarks(ctx context.Context, marks []MarkSet) error
}

// MarkRef names an isolate's mark in a bucket.
type MarkRef struct {
	Bucket  int
	Isolate string // scoped isolate id
}

// MarkSet sets an isolate's mark (in a bucket, or its high-water mark) to
// Seq; Value is the high-water mark record.
type MarkSet struct {
	Isolate string
	Seq     int64
	Value   []byte
	TTL     int64 // ns
	// Dup: the mark was read at Seq already (a duplicate's). It is set
	// again only to be confirmed (a store that waits for replicas renews
	// it, a write, and waits); a store that does not wait may skip it.
	Dup bool
}

// Versioned is a record read from a SharedStore: a key record (Value,
// Version > 0), a counter record (Counter, CountingStore; Version 0: it
// has none), or nothing (Version 0, Counter nil).
type Versioned struct {
	Value   []byte
	Version uint64
	Counter *Counter
}

// SubWrite is the conditional write of one bucket's part of a group: if
// every isolate's mark in Bucket is below its Seq and every key still has
// its expected version, set every key to its value (with the next version
// and a TTL) and every mark to its Seq (with its TTL), atomically.
type SubWrite struct {
	Bucket   int
	Marks    []MarkSet
	Keys     [][]byte
	Versions []uint64 // as read; 0 = absent
	Values   [][]byte
	TTLs     []int64 // ns
	// Confirm are marks found already at their batch's Seq (an earlier
	// attempt wrote the part but was not acknowledged): the store renews
	// their TTL, a write, so that a store that waits for replicas (WAIT)
	// confirms the earlier write before the batch is answered as a
	// duplicate there. Nothing is checked for them.
	Confirm []MarkSet
}

// SubOutcome is what a SubWrite did.
type SubOutcome int

// The outcomes of a SubWrite.
const (
	SubApplied     SubOutcome = iota // written
	SubConflict                      // a key's version changed: nothing written
	SubDuplicate                     // an isolate's mark was already at its Seq: nothing written
	SubFailed                        // not known to be written (the master could not be reached)
	SubUnconfirmed                   // written, but not confirmed durable (WAIT not met): the batch fails and is retried
)

// sharedAttempts bounds the read-merge-write rounds of one bucket under
// contention; past it the batches with a part there fail with
// ErrUnavailable and are retried by their isolates (nothing was applied
// twice).
const sharedAttempts = 16

// sharedTTLMargin is added to every record's TTL past the time its state
// stops mattering: 1 minute.
const sharedTTLMargin = int64(60e9)

// sharedMaxGroup is the most batches merged as one group.
const sharedMaxGroup = 256

// sharedWorkers is the number of groups one coordinator has in flight at
// once; two groups writing the same key conflict like two coordinators do,
// and one of them merges again. One: on the 2-core machine of the
// measurements, 4 gave no more throughput (Redis and the coordinator were
// already using the cores), and conflicts only cost.
const sharedWorkers = 1

// SharedMerger merges batches into a store that several coordinators share
// (Redis Cluster, SharedStore): it groups the batches that arrive together
// (at most sharedMaxGroup), reads their keys' records, merges them as
// Merger does and writes them back under the store's version checks,
// merging again on a conflict with another coordinator.
type SharedMerger struct {
	store SharedStore
	cfg   wire.Config
	opts  MergerOptions
	obs   Observer // told of each applied batch; nil: none
	reqs  chan *sharedReq
	mu    sync.Mutex
	stats MergeStats
}

// sharedReq is one batch waiting for its group.
type sharedReq struct {
	ctx   context.Context // the request's: its group's store calls stop once every request's has ended
	b     *wire.Batch
	scope string
	rp    *wire.Reply
	stale int64
	err   error
	done  chan struct{}
	// group state
	iso string
	h   hwmState
	// pred: the high-water mark of the predecessor the batch names
	// (wire.Batch.Prev), read with the isolates' marks; seq 0: none, or
	// unknown (handover.go checks its secret).
	pred hwmState
	// predRefused: a written part of the batch counted its predecessor
	// refused (the batch counts it once).
	predRefused bool
	sum         uint64
	dup         bool
	subs        []*sharedSub
	skew        error // its times are ahead (checkTimes): refused unless its number was applied
}

// NewSharedMerger returns a SharedMerger over store for the limiters of cfg
// (zero fields of opts take their defaults; obs, if not nil, is told of
// each applied batch), or an error when cfg or opts are not valid.
func NewSharedMerger(cfg wire.Config, store SharedStore, opts MergerOptions, obs Observer) (*SharedMerger, error) {
	opts.EnsureDefaults()
	s := &SharedMerger{store: store, cfg: cfg, opts: opts, obs: obs, reqs: make(chan *sharedReq, sharedMaxGroup)}
	if _, err := s.newMerger(); err != nil {
		return nil, err // the configuration
	}
	return s, nil
}

// emptyStore holds nothing: the Mergers of shared mode are seeded with
// every state they touch.
type emptyStore struct{}

func (emptyStore) Get([]byte) ([]byte, bool, error)                       { return nil, false, nil }
func (emptyStore) Commit([]Op) error                                      { return errors.New("merge: shared merger commits nothing") }
func (emptyStore) Scan(_, _ []byte, _ func(key, value []byte) bool) error { return nil }
func (emptyStore) Close() error                                           { return nil }

func (s *SharedMerger) newMerger() (*Merger, error) {
	opts := s.opts
	opts.NoFullNotices = true                   // a group's Merger lives for one group: it has no log to tell (fullnotice.go)
	return NewMerger(s.cfg, emptyStore{}, opts) // no dashboard: the group reports each batch once
}

// resetShared empties m for the next bucket.
func (m *Merger) resetShared() {
	m.dirtyKeys, m.dirtyHWMs, m.deletes = m.dirtyKeys[:0], m.dirtyHWMs[:0], nil
	m.keys, m.keyWeight = map[string]*keyState{}, 0
	m.hwms = map[string]*hwmState{}
	m.isoEntries = 0
}

func (s *SharedMerger) addStats(f func(st *MergeStats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// Stats returns the counters of every batch merged so far.
func (s *SharedMerger) Stats() MergeStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Shared record: uvarint len(state) | state (keyState.encode) | for
// approximate limiters, the isolate sketch: varint epoch, 8 x uint64 LE.
func encodeShared(dst []byte, st *keyState) []byte {
	var tmp [512]byte
	state := st.encode(tmp[:0])
	dst = binary.AppendUvarint(dst, uint64(len(state)))
	dst = append(dst, state...)
	if !st.lim.Leased() {
		dst = binary.AppendVarint(dst, st.sk.epoch)
		for _, w := range st.sk.cur {
			dst = binary.LittleEndian.AppendUint64(dst, w)
		}
		for _, w := range st.sk.prev {
			dst = binary.LittleEndian.AppendUint64(dst, w)
		}
	}
	return dst
}

func decodeShared(st *keyState, rec []byte, maxIsos int) error {
	n, k := binary.Uvarint(rec)
	if k <= 0 || uint64(len(rec)-k) < n {
		return errCorrupt
	}
	if err := st.decode(rec[k:k+int(n)], maxIsos); err != nil {
		return err
	}
	rest := rec[k+int(n):]
	if len(rest) == 0 {
		return nil
	}
	e, k := binary.Varint(rest)
	if k <= 0 || len(rest)-k != 64 {
		return errCorrupt
	}
	rest = rest[k:]
	st.sk.epoch = e
	for i := range st.sk.cur {
		st.sk.cur[i] = binary.LittleEndian.Uint64(rest[8*i:])
		st.sk.prev[i] = binary.LittleEndian.Uint64(rest[32+8*i:])
	}
	return nil
}

// seedKey puts the state of v (not found: a fresh key) in m's cache. A
// counter record (a limiter that was countable when it was written) gives
// its counts.
func (m *Merger) seedKey(lim *wire.LimiterConfig, skey string, v Versioned, now int64) (*keyState, error) {
	if v.Counter != nil {
		return m.seedCounter(lim, skey, v.Counter), nil
	}
	st := newKeyState(lim, skey)
	if rec := v.Value; v.Version != 0 {
		if err := decodeShared(st, rec, m.opts.MaxIsolatesPerKey); err != nil {
			// As loadKey: started again, counted; written whole by the
			// bucket's next write (its version checked as read).
			st = newKeyState(lim, skey)
			m.stats.CorruptRecords++
		}
		m.isoEntries += len(st.isos)
		if _, key, ok := splitKeyStorageKey([]byte(skey)); ok {
			m.refit(st, key, now)
		}
	}
	m.cacheKey(skey, st)
	return st, nil
}

// sharedTTL is how long the record of st must live after now, in ns: until
// its window is older than the previous one (windowed) or its bucket is
// full (TAT), no isolate seen within 2 periods or holding a standing
// lease still needs it, and its upstream state is over (upUntil); plus
// one period and sharedTTLMargin.
func sharedTTL(st *keyState, now int64) int64 {
	P := st.lim.Period
	until := st.tat
	if !st.lim.IsBucket() {
		until = addSat(st.win, 2) * P
	}
	until = max(until, st.upUntil())
	for i := range st.isos {
		is := &st.isos[i]
		until = max(until, addSat(is.seen, 2*P))
		if is.standUntil > 0 {
			until = max(until, addSat(is.standUntil, 1)*P)
		}
	}
	return addSat(max(until-now, 0), addSat(P, sharedTTLMargin))
}

// sharedSub is one batch's part in one bucket.
type sharedSub struct {
	req     *sharedReq
	bucket  int
	entries []wire.Delta
	asks    []wire.Ask // the batch's asks for keys of the bucket (shared_amend.go)
	keys    []string   // distinct storage keys, in order of first appearance
	rp      *wire.Reply
	applied MergeStats // what applying it did (DeltasApplied, DeltasStale, AsksGranted)
}

// sharedBucket is a group's part in one bucket.
type sharedBucket struct {
	bucket int
	subs   []*sharedSub
	keys   []string // distinct storage keys of subs
}

// Run starts the merge loops (sharedWorkers of them); done is closed once quit is and they
// all ended.
func (s *SharedMerger) Run(clock func() int64, quit <-chan struct{}, done chan<- struct{}) {
	var wg sync.WaitGroup
	for i := 0; i < sharedWorkers; i++ {
		m, _ := s.newMerger() // the configuration was checked by NewSharedMerger
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.loop(m, clock, quit)
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
}

// loop merges the submitted batches group by group until quit is closed.
func (s *SharedMerger) loop(m *Merger, clock func() int64, quit <-chan struct{}) {
	var carry []*sharedReq
	for {
		group := carry
		carry = nil
		if len(group) == 0 {
			select {
			case r := <-s.reqs:
				group = append(group, r)
			case <-quit:
				return
			}
		}
	drain:
		for len(group) < sharedMaxGroup {
			select {
			case r := <-s.reqs:
				group = append(group, r)
			default:
				break drain
			}
		}
		// One batch per isolate in a group: a second one (a retry sent
		// while the first is being merged) waits for the next group.
		isos := make(map[string]bool, len(group))
		n := 0
		for _, r := range group {
			r.iso = r.scope + r.b.Isolate
			if isos[r.iso] {
				carry = append(carry, r)
				continue
			}
			isos[r.iso] = true
			group[n] = r
			n++
		}
		group = group[:n]
		gctx, cancel := groupContext(group)
		s.applyGroup(gctx, m, group, clock())
		cancel()
		for _, r := range group {
			close(r.done)
		}
	}
}

// applyGroup merges group (at most one batch per isolate) at time now; see
// the comment at the top of the file. Each request gets its reply or error.
func (s *SharedMerger) applyGroup(ctx context.Context, m *Merger, group []*sharedReq, now int64) {
	live := group[:0:0]
	for _, r := range group {
		if r.err = m.Check(r.b); r.err == nil {
			r.skew = m.checkTimes(r.b, now)
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	// Cut every batch into its parts per bucket: in each bucket, one part
	// of counted entries (sharedcount.go) and one of the others.
	type part struct {
		bucket  int
		counted bool
	}
	_, counting := s.store.(CountingStore)
	byBucket := map[part]*sharedBucket{}
	var buckets, counted []*sharedBucket
	var buf []byte
	var amendments int64
	for _, r := range live {
		if r.skew != nil {
			continue // refused, or a retry: nothing of it is read (below)
		}
		subOf := map[part]*sharedSub{}
		subFor := func(pk part, key []byte) *sharedSub {
			sb := subOf[pk]
			if sb == nil {
				sb = &sharedSub{req: r, bucket: pk.bucket}
				subOf[pk] = sb
				r.subs = append(r.subs, sb)
				g := byBucket[pk]
				if g == nil {
					g = &sharedBucket{bucket: pk.bucket}
					byBucket[pk] = g
					if pk.counted {
						counted = append(counted, g)
					} else {
						buckets = append(buckets, g)
					}
				}
				g.subs = append(g.subs, sb)
			}
			if !slicesContains(sb.keys, string(key)) {
				sb.keys = append(sb.keys, string(key))
			}
			return sb
		}
		for i := range r.b.Entries {
			e := r.b.Entries[i]
			buf = appendKeyStorageKey(buf[:0], e.Limiter, e.Key)
			sb := subFor(part{s.store.Bucket(buf), counting && countable(m.lims[e.Limiter])}, buf)
			sb.entries = append(sb.entries, e)
		}
		if len(r.b.Asks) > 0 {
			amendments++
			buf = s.routeAsks(m, r.b, buf, func(bucket int, key []byte) *sharedSub { return subFor(part{bucket: bucket}, key) })
		}
	}
	for _, g := range append(buckets, counted...) {
		seen := map[string]bool{}
		for _, sb := range g.subs {
			for _, k := range sb.keys {
				if !seen[k] {
					seen[k] = true
					g.keys = append(g.keys, k)
				}
			}
		}
	}
	// One round trip reads the isolates' high-water marks with the first
	// read of the buckets (a batch the sequence rules refuse had its keys
	// read for nothing: rare).
	isos := make([]string, len(live))
	for i, r := range live {
		isos[i] = r.iso
	}
	predAt := make([]int, len(live)) // the index of its predecessor's mark in isos; 0: none
	for i, r := range live {
		if r.b.Prev != "" && r.skew == nil {
			predAt[i] = len(isos)
			isos = append(isos, r.scope+r.b.Prev)
		}
	}
	rd, hv, err := s.readBuckets(ctx, buckets, isos)
	if err != nil {
		for _, r := range live {
			r.err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return
	}
	var refused int64
	ok := live[:0]
	for i, r := range live {
		r.h = hwmState{id: r.iso, hash: isoHash(r.iso)}
		if j := predAt[i]; j > 0 && hv[j] != nil {
			r.pred = hwmState{id: isos[j], hash: isoHash(isos[j])}
			if r.pred.decode(hv[j]) != nil {
				r.pred = hwmState{}
			}
		}
		if hv[i] != nil {
			if err := r.h.decode(hv[i]); err != nil {
				r.err = fmt.Errorf("merge: read high-water mark of isolate %q: %w", r.iso, err)
				continue
			}
		}
		if r.skew != nil {
			// A number applied already (a retry whose first attempt
			// another coordinator, with a clock ahead of this one,
			// applied): not "never applied", which the refusal for its
			// times would tell the isolate (it would take the batch back
			// and count it again); it retries later, here or there.
			r.err = r.skew
			if r.h.retried(r.b) {
				r.err = fmt.Errorf("%w: batch %d of isolate %q was applied already, and its times are ahead of this coordinator's clock: retry", ErrUnavailable, r.b.Seq, r.iso)
			}
			continue
		}
		r.sum = batchSum(r.b)
		if r.dup, r.err = checkSeq(&r.h, r.b, r.sum); r.err != nil {
			refused++
			continue
		}
		ok = append(ok, r)
	}
	live = ok
	// Drop the parts of the refused batches.
	buckets, counted = keepLive(buckets), keepLive(counted)
	if len(counted) > 0 {
		s.addCounts(ctx, m, counted, now)
	}
	pending := buckets
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == sharedAttempts {
			for _, g := range pending {
				for _, sb := range g.subs {
					sb.req.err = fmt.Errorf("%w: a bucket still conflicting after %d attempts", ErrUnavailable, sharedAttempts)
				}
			}
			break
		}
		if attempt > 0 {
			// Another coordinator wrote the same keys: back off a random
			// 0-2^attempt x 100µs (at most ~13 ms) so the two stop colliding.
			time.Sleep(time.Duration(rand.Int64N(int64(100*time.Microsecond) << min(attempt, 7))))
		}
		pending = s.mergeBuckets(ctx, m, pending, now, rd)
		rd = nil // read again
	}
	// Advance the high-water marks of the batches written in full. A
	// duplicate's mark is at its Seq already: set again, it is renewed (a
	// write), so that a store that waits for replicas confirms it before
	// the duplicate is answered. The attempt that set it may have failed
	// on that wait, and a mark lost with its master would refuse the
	// isolate's next batch as a gap (409: a new incarnation).
	var adv []MarkSet
	for _, r := range live {
		if r.err != nil {
			continue
		}
		if !r.dup {
			r.h.seq, r.h.seen, r.h.sum = r.b.Seq, now, r.sum
			r.h.bind(r.b)
		}
		adv = append(adv, MarkSet{Isolate: r.iso, Seq: r.b.Seq, Value: r.h.encode(nil), TTL: int64(s.opts.IsolateTTL), Dup: r.dup})
	}
	if len(adv) > 0 {
		if err := s.store.AdvanceMarks(ctx, adv); err != nil {
			for _, r := range live {
				if r.err == nil {
					r.err = fmt.Errorf("%w: %w", ErrUnavailable, err)
				}
			}
		}
	}
	var st MergeStats
	st.SeqRefused = refused
	st.Amendments = amendments
	for _, r := range live {
		if r.err != nil {
			continue
		}
		r.rp = s.reply(r, now)
		for _, sb := range r.subs {
			r.stale += sb.applied.DeltasStale
		}
		if r.dup {
			st.Duplicates++
		} else {
			st.Batches++
			if s.obs != nil {
				s.obs.Applied(r.b, r.rp, now)
			}
		}
	}
	s.addStats(func(t *MergeStats) {
		t.SeqRefused += st.SeqRefused
		t.Duplicates += st.Duplicates
		t.Batches += st.Batches
		t.Amendments += st.Amendments
	})
}

// keepLive drops from gs the parts of the batches refused (err set), and
// the buckets left with none.
func keepLive(gs []*sharedBucket) []*sharedBucket {
	kept := gs[:0]
	for _, g := range gs {
		subs := g.subs[:0]
		for _, sb := range g.subs {
			if sb.req.err == nil {
				subs = append(subs, sb)
			}
		}
		if g.subs = subs; len(subs) > 0 {
			kept = append(kept, g)
		}
	}
	return kept
}

// groupContext returns the context of a group's store calls: it ends once
// the context of every request of group has (their clients gave up), so a
// store that retries through a failover stops for a group nobody waits
// for.
func groupContext(group []*sharedReq) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int64
	left.Store(int64(len(group)))
	stops := make([]func() bool, len(group))
	for i, r := range group {
		stops[i] = context.AfterFunc(r.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

func slicesContains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// sharedRead is what one read of buckets found.
type sharedRead struct {
	vals  map[string]Versioned // by storage key
	marks map[MarkRef]int64
}

// BucketOf returns the store's bucket of (limiter, key): where its record,
// and the sequence mark of an isolate that writes it, live.
func (s *SharedMerger) BucketOf(limiter, key string) int {
	return s.store.Bucket(appendKeyStorageKey(nil, limiter, key))
}

// readBuckets reads the keys of gs and the marks of their parts' isolates,
// and the high-water marks of isolates, in one round trip per master.
func (s *SharedMerger) readBuckets(ctx context.Context, gs []*sharedBucket, isolates []string) (*sharedRead, [][]byte, error) {
	var keys [][]byte
	var refs []MarkRef
	for _, g := range gs {
		for _, k := range g.keys {
			keys = append(keys, []byte(k))
		}
		for _, sb := range g.subs {
			refs = append(refs, MarkRef{Bucket: g.bucket, Isolate: sb.req.iso})
		}
	}
	vals, marks, hv, err := s.store.ReadShared(ctx, keys, refs, isolates)
	if err != nil {
		return nil, nil, err
	}
	rd := &sharedRead{vals: make(map[string]Versioned, len(keys)), marks: make(map[MarkRef]int64, len(refs))}
	for i, k := range keys {
		rd.vals[string(k)] = vals[i]
	}
	for i, r := range refs {
		rd.marks[r] = marks[i]
	}
	return rd, hv, nil
}

// mergeBuckets merges and writes the buckets of gs once, on what rd holds
// (nil: read them first), and returns those to try again (a conflict, or a
// mark already moved).
func (s *SharedMerger) mergeBuckets(ctx context.Context, m *Merger, gs []*sharedBucket, now int64, rd *sharedRead) []*sharedBucket {
	fail := func(gs []*sharedBucket, err error) []*sharedBucket {
		for _, g := range gs {
			for _, sb := range g.subs {
				sb.req.err = err
			}
		}
		return nil
	}
	if rd == nil {
		var err error
		if rd, _, err = s.readBuckets(ctx, gs, nil); err != nil {
			return fail(gs, fmt.Errorf("%w: %w", ErrUnavailable, err))
		}
	}
	var writes []SubWrite
	var wgs []*sharedBucket
	var wrecs []MergeStats // per write: what its bucket's records counted (recordStats)
	for _, g := range gs {
		m.resetShared()
		before := m.stats
		versions := make(map[string]uint64, len(g.keys))
		bad := error(nil)
		for _, k := range g.keys {
			v := rd.vals[k]
			name, _, _ := splitKeyStorageKey([]byte(k))
			if _, err := m.seedKey(m.lims[name], k, v, now); err != nil && bad == nil {
				bad = err
			}
			versions[k] = v.Version
		}
		w := SubWrite{Bucket: g.bucket}
		confirm := false // a part has asks, or a duplicate's reply tells a lease: the bucket is written even if every part is a duplicate
		for _, sb := range g.subs {
			r := sb.req
			mark := rd.marks[MarkRef{Bucket: g.bucket, Isolate: r.iso}]
			subDup := r.dup || mark >= r.b.Seq
			if bad != nil {
				continue
			}
			hs := &hwmState{id: r.iso, hash: r.h.hash, seq: r.b.Seq - 1}
			if subDup {
				hs.seq = r.b.Seq // sum 0: a retry of whatever took the number
			}
			m.hwms[r.iso] = hs
			if r.pred.seq > 0 {
				p := r.pred
				m.hwms[p.id] = &p // predecessor checks its secret
			}
			before := m.stats
			asks := liveAsks(sb.asks, mark, r.b.Seq)
			rp, err := m.ApplyAs(&wire.Batch{Version: r.b.Version, Isolate: r.b.Isolate, Seq: r.b.Seq, At: r.b.At,
				Entries: sb.entries, Asks: asks, Limits: r.b.Limits, Spans: r.b.Spans, Pace: r.b.Pace,
				End: r.b.End, Prev: r.b.Prev, PrevSecret: r.b.PrevSecret}, r.scope, now, nil)
			if err != nil {
				bad = err
				continue
			}
			sb.rp = rp
			sb.applied = MergeStats{DeltasApplied: m.stats.DeltasApplied - before.DeltasApplied,
				DeltasStale: m.stats.DeltasStale - before.DeltasStale,
				AsksGranted: m.stats.AsksGranted - before.AsksGranted,
				Handovers:   m.stats.Handovers - before.Handovers, HandoversRefused: m.stats.HandoversRefused - before.HandoversRefused}
			// A part with asks is written even when they raised no lease
			// (resent, covered already), and so is a duplicate whose reply
			// tells a lease (sharedconfirm.go): the write, acknowledged
			// like any (WAIT), confirms the leases its reply tells, which
			// an earlier attempt may have written without confirmation.
			told := subDup && m.confirmLeases(rp)
			confirm = confirm || told || len(asks) > 0
			ms := MarkSet{Isolate: r.iso, Seq: r.b.Seq, TTL: m.sharedMarkTTL(sb.entries, now, int64(s.opts.IsolateTTL))}
			switch {
			case !subDup:
				w.Marks = append(w.Marks, ms)
			case !r.dup:
				w.Confirm = append(w.Confirm, ms) // written by an attempt not acknowledged
			}
		}
		if bad != nil {
			fail([]*sharedBucket{g}, bad)
			continue
		}
		if len(w.Marks) == 0 && len(w.Confirm) == 0 && !confirm {
			continue // duplicates only, no asks, telling no lease: answered from what was read
		}
		for _, st := range m.dirtyKeys {
			w.Keys = append(w.Keys, []byte(st.skey))
			w.Versions = append(w.Versions, versions[st.skey])
			w.Values = append(w.Values, encodeShared(nil, st))
			w.TTLs = append(w.TTLs, sharedTTL(st, now))
		}
		writes, wgs, wrecs = append(writes, w), append(wgs, g), append(wrecs, recordStats(m.stats, before))
	}
	m.resetShared()
	if len(writes) == 0 {
		return nil
	}
	outs, err := s.store.WriteShared(ctx, writes)
	if len(outs) != len(writes) {
		return fail(wgs, fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	var again []*sharedBucket
	var written MergeStats
	for j, o := range outs {
		switch o {
		case SubConflict, SubDuplicate:
			again = append(again, wgs[j]) // conflict: merge again; a mark moved: answer as a duplicate
			continue
		case SubFailed:
			fail(wgs[j:j+1], fmt.Errorf("%w: %w", ErrUnavailable, err))
			continue
		case SubUnconfirmed:
			fail(wgs[j:j+1], fmt.Errorf("%w: %w", ErrUnavailable, err))
		}
		written.CorruptRecords += wrecs[j].CorruptRecords
		written.RecordsRefit += wrecs[j].RecordsRefit
		written.LeasesReclaimed += wrecs[j].LeasesReclaimed
		for _, sb := range wgs[j].subs {
			written.DeltasApplied += sb.applied.DeltasApplied
			written.DeltasStale += sb.applied.DeltasStale
			written.AsksGranted += sb.applied.AsksGranted
			written.Handovers += sb.applied.Handovers
			if sb.applied.HandoversRefused > 0 && !sb.req.predRefused {
				// Each bucket's part checked the predecessor: one batch,
				// one refusal (the Merger counts one per batch).
				written.HandoversRefused++
				sb.req.predRefused = true
			}
		}
	}
	// Counted once written, whether or not the rest of the batch is.
	s.addStats(func(t *MergeStats) {
		t.DeltasApplied += written.DeltasApplied
		t.DeltasStale += written.DeltasStale
		t.AsksGranted += written.AsksGranted
		t.Handovers += written.Handovers
		t.HandoversRefused += written.HandoversRefused
		t.CorruptRecords += written.CorruptRecords
		t.RecordsRefit += written.RecordsRefit
		t.LeasesReclaimed += written.LeasesReclaimed
	})
	return again
}

// recordStats returns what a bucket's merge counted of its records from
// before to after: records started again (corrupt), refit to the
// configuration, leases reclaimed to make room. They reach the
// SharedMerger's counters once the bucket is written (a bucket merged
// again after a conflict counts them again otherwise).
func recordStats(after, before MergeStats) MergeStats {
	return MergeStats{CorruptRecords: after.CorruptRecords - before.CorruptRecords,
		RecordsRefit: after.RecordsRefit - before.RecordsRefit, LeasesReclaimed: after.LeasesReclaimed - before.LeasesReclaimed}
}

// reply assembles r's reply from its parts' views: one per distinct key,
// in order of first appearance in the batch, then the keys of its asks
// (askOrder, shared_amend.go), as Merger.Apply orders them.
func (s *SharedMerger) reply(r *sharedReq, now int64) *wire.Reply {
	rp := &wire.Reply{Version: wire.Version, Seq: r.b.Seq, At: now}
	for _, sb := range r.subs {
		rp.Entries = append(rp.Entries, sb.rp.Entries...)
	}
	if len(r.subs) > 1 {
		order := s.askOrder(r.b)
		slices.SortStableFunc(rp.Entries, func(a, b wire.View) int {
			return cmp.Compare(order[[2]string{a.Limiter, a.Key}], order[[2]string{b.Limiter, b.Key}])
		})
	}
	// At most MaxBatchEntries views, what the module reads (each part
	// keeps to it, not their sum): the entries' keys first, then asks'.
	rp.Entries = rp.Entries[:min(len(rp.Entries), wire.MaxBatchEntries)]
	return rp
}

// KeyState returns the admin view of (limiter, key) at time now.
func (s *SharedMerger) KeyState(ctx context.Context, limiter, key string, now int64) (*KeyState, error) {
	m, err := s.newMerger()
	if err != nil {
		return nil, err
	}
	lim := m.lims[limiter]
	if lim == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownLimiter, limiter)
	}
	skey := keyStorageKey(limiter, key)
	vals, _, _, err := s.store.ReadShared(ctx, [][]byte{[]byte(skey)}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if _, err := m.seedKey(lim, skey, vals[0], now); err != nil {
		return nil, err
	}
	return m.KeyState(limiter, key, now)
}

// Reset deletes the record of (limiter, key).
func (s *SharedMerger) Reset(limiter, key string) error {
	if s.cfgLimiter(limiter) == nil {
		return fmt.Errorf("%w %q", ErrUnknownLimiter, limiter)
	}
	if err := s.store.Commit([]Op{{Key: []byte(keyStorageKey(limiter, key)), Delete: true}}); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

func (s *SharedMerger) cfgLimiter(name string) *wire.LimiterConfig {
	for i := range s.cfg.Limiters {
		if s.cfg.Limiters[i].Name == name {
			return &s.cfg.Limiters[i]
		}
	}
	return nil
}

// Sync submits b, of the isolate b.Isolate in the namespace scope (see
// ScopeLen), to the next group of s's loops (Run) and waits until the group
// is written. It returns the reply and the number of entries dropped as
// stale. Errors: as Merger.Apply's, ErrUnavailable (the store failed;
// nothing applied, retry with the same Seq), or ctx's.
func (s *SharedMerger) Sync(ctx context.Context, b *wire.Batch, scope string) (rp *wire.Reply, stale int64, err error) {
	r := &sharedReq{ctx: ctx, b: b, scope: scope, done: make(chan struct{})}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("merge: %w", ctx.Err())
	}
	<-r.done
	return r.rp, r.stale, r.err
}
