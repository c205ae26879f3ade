package coordinator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Shared mode: several coordinators over one SharedStore (Redis Cluster,
// redis.go). A Merger whose cache is authoritative cannot be shared by two
// processes, so in shared mode no state outlives a batch in a coordinator:
// each batch is merged by the same Merger code (Apply, leases) on the
// states read from the store for it, and written back with optimistic
// concurrency.
//
// The keys are spread over SharedStore buckets (a bucket is one Redis hash
// slot, through a hash tag). A batch is cut into one sub-batch per bucket;
// each sub-batch is read (its keys with their versions, and the isolate's
// mark in that bucket), merged, and written by one atomic conditional
// write that
//
//   - applies nothing when the isolate's mark in the bucket is already at
//     the batch's Seq (another coordinator applied it: at most once per
//     (isolate, Seq) in every bucket, so across the whole batch), and
//   - applies nothing when any key's version changed since the read (a
//     concurrent batch of another coordinator, or of this one); the
//     sub-batch is then read and merged again, up to sharedAttempts times.
//
// So two coordinators serving one key never lose an update, and a strict
// lease is granted only against the state it was computed on: strict never
// exceeds the limit. The sequence rules (sequence.go) are checked against
// the isolate's global high-water mark, advanced (never moved back) once
// every sub-batch is applied; a coordinator that dies between the two
// leaves the mark behind, and the retry of the batch (to any coordinator)
// finds every bucket already applied and only advances it.
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
	// ReadShared returns the records of keys with their versions, and the
	// Seq of isolate's mark in each of buckets (0: none).
	ReadShared(ctx context.Context, isolate string, keys [][]byte, buckets []int) ([]Versioned, []int64, error)
	// WriteShared performs each SubWrite atomically (each on its own) and
	// returns their outcomes, in order.
	WriteShared(ctx context.Context, subs []SubWrite) ([]SubOutcome, error)
	// AdvanceMark sets the record key (an isolate's high-water mark) to
	// value with a TTL of ttl ns, unless it holds a seq >= seq.
	AdvanceMark(ctx context.Context, key []byte, seq int64, value []byte, ttl int64) error
}

// Versioned is a record read from a SharedStore; Version 0 means absent.
type Versioned struct {
	Value   []byte
	Version uint64
}

// SubWrite is the conditional write of one bucket's sub-batch: if the
// isolate's mark in Bucket is below Seq and every key still has its
// expected version, set every key to its value (with the next version and
// a TTL) and the mark to Seq (with MarkTTL), atomically.
type SubWrite struct {
	Bucket   int
	Isolate  string // scoped isolate id
	Seq      int64
	MarkTTL  int64 // ns
	Keys     [][]byte
	Versions []uint64 // as read; 0 = absent
	Values   [][]byte
	TTLs     []int64 // ns
}

// SubOutcome is what a SubWrite did.
type SubOutcome int

// The outcomes of a SubWrite.
const (
	SubApplied   SubOutcome = iota // written
	SubConflict                    // a key's version changed: nothing written
	SubDuplicate                   // the mark was already at Seq: nothing written
)

// sharedAttempts bounds the read-merge-write rounds of one batch under
// contention; past it the batch fails with ErrUnavailable and is retried
// by the isolate (nothing was applied twice).
const sharedAttempts = 16

// sharedTTLMargin is added to every record's TTL past the time its state
// stops mattering: 1 minute.
const sharedTTLMargin = int64(60e9)

type sharedMerger struct {
	store SharedStore
	cfg   wire.Config
	opts  MergerOptions
	dash  *dashboard
	pool  sync.Pool
	mu    sync.Mutex
	stats MergeStats
	// locks serialize, in this process, the batches that share a bucket,
	// so only other coordinators' batches can make a write conflict
	// (optimistic retries under a hot key are then rare, not the norm).
	locks [sharedLockStripes]sync.Mutex
}

// sharedLockStripes is the number of bucket locks of one coordinator.
const sharedLockStripes = 256

func newSharedMerger(cfg wire.Config, store SharedStore, opts MergerOptions, dash *dashboard) *sharedMerger {
	opts.ensureDefaults()
	return &sharedMerger{store: store, cfg: cfg, opts: opts, dash: dash}
}

// emptyStore holds nothing: the Mergers of shared mode are seeded with
// every state they touch.
type emptyStore struct{}

func (emptyStore) Get([]byte) ([]byte, bool, error)                       { return nil, false, nil }
func (emptyStore) Commit([]Op) error                                      { return errors.New("coordinator: shared merger commits nothing") }
func (emptyStore) Scan(_, _ []byte, _ func(key, value []byte) bool) error { return nil }
func (emptyStore) Close() error                                           { return nil }

func (s *sharedMerger) get() (*Merger, error) {
	if m, ok := s.pool.Get().(*Merger); ok {
		return m, nil
	}
	m, err := NewMerger(s.cfg, emptyStore{}, s.opts)
	if err != nil {
		return nil, err
	}
	return m, nil // no dashboard: apply reports each batch once
}

// reset empties m for the next (sub-)batch.
func (m *Merger) resetShared() {
	m.dirtyKeys, m.dirtyHWMs, m.deletes = m.dirtyKeys[:0], m.dirtyHWMs[:0], nil
	m.keys = map[string]*keyState{}
	m.hwms = map[string]*hwmState{}
	m.isoEntries = 0
}

func (s *sharedMerger) put(m *Merger) {
	m.resetShared()
	m.stats = MergeStats{}
	s.pool.Put(m)
}

func (s *sharedMerger) addStats(f func(st *MergeStats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// Stats returns the counters of every batch merged so far.
func (s *sharedMerger) Stats() MergeStats {
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

// seedKey puts the state of rec (nil: a fresh key) in m's cache.
func (m *Merger) seedKey(lim *wire.LimiterConfig, skey string, rec []byte) (*keyState, error) {
	st := newKeyState(lim, skey)
	if rec != nil {
		if err := decodeShared(st, rec, m.opts.MaxIsolatesPerKey); err != nil {
			return nil, fmt.Errorf("coordinator: read %q: %w", skey, err)
		}
		m.isoEntries += len(st.isos)
	}
	m.keys[skey] = st
	return st, nil
}

// sharedTTL is how long the record of st must live after now, in ns: until
// its window is older than the previous one (windowed) or its bucket is
// full (TAT), and no isolate seen within 2 periods or holding a standing
// lease still needs it; plus one period and sharedTTLMargin.
func sharedTTL(st *keyState, now int64) int64 {
	P := st.lim.Period
	until := st.tat
	if !st.lim.IsBucket() {
		until = addSat(st.win, 2) * P
	}
	for i := range st.isos {
		is := &st.isos[i]
		until = max(until, addSat(is.seen, 2*P))
		if is.standUntil > 0 {
			until = max(until, addSat(is.standUntil, 1)*P)
		}
	}
	return addSat(max(until-now, 0), addSat(P, sharedTTLMargin))
}

// sharedSub is one bucket's part of a batch.
type sharedSub struct {
	bucket  int
	entries []wire.Delta
	keys    []string // distinct storage keys, in order of first appearance
	rp      *wire.Reply
}

// apply merges b (of the isolate scope+b.Isolate) at time now; see the
// comment at the top of the file. It returns the reply and the number of
// stale entries dropped.
func (s *sharedMerger) apply(ctx context.Context, b *wire.Batch, scope string, now int64) (*wire.Reply, int64, error) {
	m, err := s.get()
	if err != nil {
		return nil, 0, err
	}
	defer s.put(m)
	if err := m.Check(b); err != nil {
		return nil, 0, err
	}
	if err := m.checkTimes(b, now); err != nil {
		return nil, 0, err
	}
	iso := scope + b.Isolate
	hk := []byte(hwmStorageKey(iso))
	hv, found, err := s.store.Get(hk)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	h := hwmState{id: iso, hash: isoHash(iso)}
	if found {
		if err := h.decode(hv); err != nil {
			return nil, 0, fmt.Errorf("coordinator: read high-water mark of isolate %q: %w", iso, err)
		}
	}
	sum := batchSum(b)
	dup, err := checkSeq(&h, b, sum)
	if err != nil {
		s.addStats(func(st *MergeStats) { st.SeqRefused++ })
		return nil, 0, err
	}
	// Cut the batch into sub-batches, one per bucket.
	var subs []*sharedSub
	byBucket := map[int]*sharedSub{}
	seen := map[string]bool{}
	var buf []byte
	for i := range b.Entries {
		e := b.Entries[i]
		buf = appendKeyStorageKey(buf[:0], e.Limiter, e.Key)
		bk := s.store.Bucket(buf)
		sb := byBucket[bk]
		if sb == nil {
			sb = &sharedSub{bucket: bk}
			byBucket[bk] = sb
			subs = append(subs, sb)
		}
		sb.entries = append(sb.entries, e)
		if !seen[string(buf)] {
			seen[string(buf)] = true
			sb.keys = append(sb.keys, string(buf))
		}
	}
	// Lock the batch's buckets' stripes in order (no deadlock).
	stripes := make([]int, 0, len(subs))
	for _, sb := range subs {
		stripes = append(stripes, sb.bucket%sharedLockStripes)
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, i := range stripes {
		s.locks[i].Lock()
	}
	defer func() {
		for _, i := range stripes {
			s.locks[i].Unlock()
		}
	}()
	var applied, stale int64
	pending := subs
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == sharedAttempts {
			return nil, 0, fmt.Errorf("%w: %d sub-batches still conflicting after %d attempts", ErrUnavailable, len(pending), sharedAttempts)
		}
		if attempt > 0 {
			// Another coordinator wrote the same keys: back off a random
			// 0-2^attempt x 100µs (at most ~13 ms) so the two stop colliding.
			d := time.Duration(rand.Int64N(int64(100*time.Microsecond) << min(attempt, 7)))
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
			}
		}
		var keys [][]byte
		buckets := make([]int, len(pending))
		for i, sb := range pending {
			buckets[i] = sb.bucket
			for _, k := range sb.keys {
				keys = append(keys, []byte(k))
			}
		}
		vals, marks, err := s.store.ReadShared(ctx, iso, keys, buckets)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		var writes []SubWrite
		var wsubs []*sharedSub
		var wrps []*wire.Reply
		var wstats []MergeStats
		ki := 0
		for i, sb := range pending {
			m.resetShared()
			versions := map[string]uint64{}
			for _, k := range sb.keys {
				v := vals[ki]
				ki++
				name, _, _ := splitKeyStorageKey([]byte(k))
				var rec []byte
				if v.Version != 0 {
					rec = v.Value
				}
				if _, err := m.seedKey(m.lims[name], k, rec); err != nil {
					return nil, 0, err
				}
				versions[k] = v.Version
			}
			subDup := dup || marks[i] >= b.Seq
			hs := &hwmState{id: iso, hash: h.hash, seq: b.Seq - 1}
			if subDup {
				hs.seq = b.Seq // sum 0: a retry of whatever took the number
			}
			m.hwms[iso] = hs
			before := m.stats
			rp, err := m.ApplyAs(&wire.Batch{Version: b.Version, Isolate: b.Isolate, Seq: b.Seq, At: b.At, Entries: sb.entries}, scope, now, nil)
			if err != nil {
				return nil, 0, err
			}
			if subDup {
				sb.rp = rp
				continue
			}
			w := SubWrite{Bucket: sb.bucket, Isolate: iso, Seq: b.Seq, MarkTTL: s.opts.IsolateTTL}
			for _, st := range m.dirtyKeys {
				w.Keys = append(w.Keys, []byte(st.skey))
				w.Versions = append(w.Versions, versions[st.skey])
				w.Values = append(w.Values, encodeShared(nil, st))
				w.TTLs = append(w.TTLs, sharedTTL(st, now))
			}
			after := m.stats
			after.DeltasApplied -= before.DeltasApplied
			after.DeltasStale -= before.DeltasStale
			writes, wsubs, wrps, wstats = append(writes, w), append(wsubs, sb), append(wrps, rp), append(wstats, after)
		}
		pending = nil // every sub-batch is answered or written
		if len(writes) == 0 {
			continue
		}
		outs, err := s.store.WriteShared(ctx, writes)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		for j, o := range outs {
			switch o {
			case SubApplied:
				wsubs[j].rp = wrps[j]
				applied += wstats[j].DeltasApplied
				stale += wstats[j].DeltasStale
			default: // conflict: merge again; duplicate: answer as one
				pending = append(pending, wsubs[j])
			}
		}
	}
	if !dup {
		h.seq, h.seen, h.sum = b.Seq, now, sum
		if err := s.store.AdvanceMark(ctx, hk, b.Seq, h.encode(nil), s.opts.IsolateTTL); err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	s.addStats(func(st *MergeStats) {
		if dup {
			st.Duplicates++
		} else {
			st.Batches++
		}
		st.DeltasApplied += applied
		st.DeltasStale += stale
	})
	// One view per distinct key, in order of first appearance in b.
	rp := &wire.Reply{Version: wire.Version, Seq: b.Seq, At: now}
	for _, sb := range subs {
		rp.Entries = append(rp.Entries, sb.rp.Entries...)
	}
	if len(subs) > 1 {
		order := map[[2]string]int{}
		for i := range b.Entries {
			k := [2]string{b.Entries[i].Limiter, b.Entries[i].Key}
			if _, ok := order[k]; !ok {
				order[k] = len(order)
			}
		}
		out := make([]wire.View, len(rp.Entries))
		for _, v := range rp.Entries {
			out[order[[2]string{v.Limiter, v.Key}]] = v
		}
		rp.Entries = out
	}
	if !dup {
		s.dash.applied(b, rp, now)
	}
	return rp, stale, nil
}

// keyState returns the admin view of (limiter, key) at time now.
func (s *sharedMerger) keyState(ctx context.Context, limiter, key string, now int64) (*KeyState, error) {
	m, err := s.get()
	if err != nil {
		return nil, err
	}
	defer s.put(m)
	lim := m.lims[limiter]
	if lim == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownLimiter, limiter)
	}
	skey := keyStorageKey(limiter, key)
	vals, _, err := s.store.ReadShared(ctx, "", [][]byte{[]byte(skey)}, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var rec []byte
	if vals[0].Version != 0 {
		rec = vals[0].Value
	}
	if _, err := m.seedKey(lim, skey, rec); err != nil {
		return nil, err
	}
	return m.KeyState(limiter, key, now)
}

// reset deletes the record of (limiter, key).
func (s *sharedMerger) reset(limiter, key string) error {
	if s.cfgLimiter(limiter) == nil {
		return fmt.Errorf("%w %q", ErrUnknownLimiter, limiter)
	}
	if err := s.store.Commit([]Op{{Key: []byte(keyStorageKey(limiter, key)), Delete: true}}); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

func (s *sharedMerger) cfgLimiter(name string) *wire.LimiterConfig {
	for i := range s.cfg.Limiters {
		if s.cfg.Limiters[i].Name == name {
			return &s.cfg.Limiters[i]
		}
	}
	return nil
}

// syncShared is Coordinator.sync in shared mode: the batch is merged by the
// request's goroutine, concurrently with the others (the store arbitrates).
func (c *Coordinator) syncShared(ctx context.Context, b *wire.Batch) (*request, error) {
	c.closeMu.RLock()
	if c.closed {
		c.closeMu.RUnlock()
		return nil, ErrClosed
	}
	c.inflight.Add(1)
	c.closeMu.RUnlock()
	defer c.inflight.Done()
	start := time.Now()
	rp, stale, err := c.shared.apply(ctx, b, scopeOf(ctx), c.opts.Clock())
	if errors.Is(err, ErrUnavailable) {
		c.storeDown.Store(true)
	}
	if err != nil {
		return nil, err
	}
	c.storeDown.Store(false)
	c.met.observeCommit(time.Since(start), 1)
	c.dash.committed(time.Since(start))
	return &request{batch: b, reply: rp, stale: stale}, nil
}

// mergeStats returns the merge counters (of the Merger, or in shared mode
// of every batch this coordinator merged).
func (c *Coordinator) mergeStats() MergeStats {
	if c.shared != nil {
		return c.shared.Stats()
	}
	var s MergeStats
	c.withMerger(func(m *Merger) { s = m.Stats() })
	return s
}
