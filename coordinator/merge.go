package coordinator

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// DefaultCheckpointKeys is MergerOptions.CheckpointKeys with the default
// MaxCachedKeys: 131072.
const DefaultCheckpointKeys = 1 << 17

// MergerOptions bound the memory of a Merger. Zero fields take the defaults.
type MergerOptions struct {
	// MaxCachedKeys is the most (limiter, key) states kept in memory; beyond
	// it, states are evicted after a commit and re-read from the Store on
	// demand. Default 262144.
	MaxCachedKeys int
	// MaxIsolatesPerKey is the most isolates remembered per key (for
	// View.Isolates and strict leases). Default 256.
	MaxIsolatesPerKey int
	// MaxIsolateEntries is the most (key, isolate) entries in memory across
	// all keys; past it, new isolates of a key are not tracked (their
	// Isolates count is not raised and strict mode grants them no lease).
	// Default 1048576.
	MaxIsolateEntries int
	// MaxCachedIsolates is the most isolate high-water marks kept in memory.
	// Default 65536.
	MaxCachedIsolates int
	// IsolateTTL is how long an isolate may stay silent before GC deletes
	// its high-water mark, in ns. A batch retried after that is applied
	// again, so it must exceed any retry horizon. Default 24h.
	IsolateTTL int64
	// MaxClockSkew is how far an isolate's clock may run ahead of the
	// coordinator's, in ns: a batch cut later than now+MaxClockSkew, or a
	// windowed entry in a window past the one of now+MaxClockSkew plus one,
	// is refused (see times.go). Default 10 s (DefaultMaxClockSkew).
	MaxClockSkew int64
	// CheckpointKeys: a checkpoint is due once this many distinct keys and
	// isolates were logged since the previous one (see wal.go). Keys logged
	// but not checkpointed stay in memory, so this bounds the cache's
	// overshoot. Default MaxCachedKeys/2.
	CheckpointKeys int
	// CheckpointBytes: a checkpoint is due once the log since the previous
	// one holds this many bytes (what a restart after a crash replays).
	// Default 64 MiB.
	CheckpointBytes int64
	// CheckpointInterval: a checkpoint is due this long after the previous
	// one when anything was logged since, in ns. Default 10 s.
	CheckpointInterval int64
}

func (o *MergerOptions) ensureDefaults() {
	if o.MaxCachedKeys <= 0 {
		o.MaxCachedKeys = 1 << 18
	}
	if o.MaxIsolatesPerKey <= 0 {
		o.MaxIsolatesPerKey = 256
	}
	if o.MaxIsolateEntries <= 0 {
		o.MaxIsolateEntries = 1 << 20
	}
	if o.MaxCachedIsolates <= 0 {
		o.MaxCachedIsolates = 1 << 16
	}
	if o.IsolateTTL <= 0 {
		o.IsolateTTL = int64(24 * 3600 * 1e9)
	}
	if o.MaxClockSkew <= 0 {
		o.MaxClockSkew = DefaultMaxClockSkew
	}
	if o.CheckpointKeys <= 0 {
		o.CheckpointKeys = max(o.MaxCachedKeys/2, 1)
	}
	if o.CheckpointBytes <= 0 {
		o.CheckpointBytes = 64 << 20
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = int64(10 * 1e9)
	}
}

// MergeStats counts what a Merger did since it was created.
type MergeStats struct {
	Batches       int64 // batches applied
	Duplicates    int64 // retries of the isolate's last applied batch, not applied again
	SeqRefused    int64 // batches refused for their sequence number (stale, gap, conflict; see sequence.go)
	DeltasApplied int64 // entries applied
	DeltasStale   int64 // windowed entries older than the newest window - 1, dropped
	GCDeleted     int64 // records deleted by GC
	Checkpoints   int64 // checkpoints committed
	Replayed      int64 // log records replayed (after a crash or a failed commit)
}

// Merger is the merge state machine: it applies batches to the state of
// each (limiter, key), computes replies and leases, and stages the writes
// for one atomic Commit. It never reads a clock (now is an argument), starts
// no goroutine and is not safe for concurrent use.
//
// Apply mutates the in-memory state at once; Commit writes everything staged
// since the previous Commit in one Store commit. When Commit fails, every
// cached state is dropped and re-read from the Store, so a failed commit
// leaves no trace (View.Isolates of approximate limiters restarts from 1).
type Merger struct {
	opts       MergerOptions
	lims       map[string]*wire.LimiterConfig
	store      Store
	keys       map[string]*keyState
	hwms       map[string]*hwmState
	isoEntries int
	dash       *dashboard // fed the views of each applied batch; nil outside a Coordinator
	dirtyKeys  []*keyState
	dirtyHWMs  []*hwmState
	deletes    [][]byte
	buf        []byte
	gen        int64 // last stage handed out by Stage
	ckptDone   int64 // every state logged up to this stage is in its own record
	ckptOps    []Op  // newest logged op per key since the last checkpoint began (aliasing the log records)
	ckptCarry  []Op  // the ops of a failed checkpoint, written by the next one first
	stageRefs  []stageRef
	ckptEpoch  int64 // numbers the checkpoints (keyState.epoch)
	ckptCount  int   // distinct keys and isolates logged since the last checkpoint began
	ckptBytes  int64 // log bytes since the last checkpoint began
	ckptAt     int64 // time of the last checkpoint, ns
	evictStuck int64 // ckptDone when evict last stopped short of its target (-1: it did not)
	recover    bool  // the cache was dropped after a failure: replay the log first
	aborts     int64 // times the cache was dropped (Abort, failed Committed)
	gcCursor   []byte
	stats      MergeStats
	res        *residency  // nil unless EnablePrefetch
	applySeq   int64       // numbers the Apply calls (keyState.mark)
	slots      []slot      // scratch of Apply
	sigs       []*keyState // scratch of Apply: the keys of the batch's signals
	at         []int32     // scratch of Apply
}

// NewMerger returns a Merger for the limiters of cfg over store.
func NewMerger(cfg wire.Config, store Store, opts MergerOptions) (*Merger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("coordinator: config: %w", err)
	}
	opts.ensureDefaults()
	m := &Merger{opts: opts, store: store, evictStuck: -1, lims: map[string]*wire.LimiterConfig{},
		keys: map[string]*keyState{}, hwms: map[string]*hwmState{}}
	for i := range cfg.Limiters {
		l := cfg.Limiters[i]
		m.lims[l.Name] = &l
	}
	// What a crash left in the log goes to the records first.
	if err := m.Recover(); err != nil {
		return nil, err
	}
	return m, nil
}

// Recover replays the log into the records and drops the cache (see
// wal.go). NewMerger calls it, and the Merger calls it itself after a failed
// commit before it reads state again; the caller must make sure no
// checkpoint is being committed meanwhile.
func (m *Merger) Recover() error {
	n, err := replayLog(m.store)
	if err != nil {
		m.recover = true
		return err
	}
	m.stats.Replayed += int64(n)
	m.dropCache()
	m.resetCkpt()
	m.ckptDone = m.gen
	m.recover = false
	return nil
}

// NeedsRecovery reports whether the next operation will first replay the
// log (a commit failed since the last replay).
func (m *Merger) NeedsRecovery() bool { return m.recover }

func (m *Merger) recovered() error {
	if !m.recover {
		return nil
	}
	if err := m.Recover(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Stats returns the counters of m.
func (m *Merger) Stats() MergeStats { return m.stats }

// Limiter returns the configuration of the limiter named name, or nil.
func (m *Merger) Limiter(name string) *wire.LimiterConfig { return m.lims[name] }

// Check validates b and reports the first entry naming an unknown limiter,
// as a *wire.FieldError naming the field ("e[3].limiter"). It only reads the
// configuration, so it is safe to call concurrently with Apply.
func (m *Merger) Check(b *wire.Batch) error {
	if err := b.Validate(); err != nil {
		return err
	}
	for i := range b.Entries {
		if m.lims[b.Entries[i].Limiter] == nil {
			return &wire.FieldError{Field: "e[" + strconv.Itoa(i) + "].limiter",
				Err: errors.New("unknown limiter " + strconv.Quote(b.Entries[i].Limiter))}
		}
	}
	for i := range b.Signals {
		if m.lims[b.Signals[i].Limiter] == nil {
			return &wire.FieldError{Field: "up[" + strconv.Itoa(i) + "].limiter",
				Err: errors.New("unknown limiter " + strconv.Quote(b.Signals[i].Limiter))}
		}
	}
	return nil
}

// slot is one distinct key of a batch.
type slot struct {
	st     *keyState
	key    string
	maxWin int64 // largest window of the key's entries
	demand int64 // sum of max(Demand, Delta) of the key's entries
	unmet  int64 // sum of Demand - Delta where positive: cost the isolate was refused (e.g. waiting for a lease)
}

// Apply applies b at time now (ns) and returns the reply: one View per
// distinct (limiter, key), in order of first appearance. A retry of the
// isolate's last applied batch (same Seq, same content) is not applied
// again and gets the current views; any other sequence number but the next
// is a *SeqError (see sequence.go). Nothing is applied when it returns an
// error. The changes are staged for the next Commit.
func (m *Merger) Apply(b *wire.Batch, now int64) (*wire.Reply, error) {
	return m.ApplyAs(b, "", now, nil)
}

// ApplyPrefetched is Apply with the records Prefetch read for b (pf may be
// nil); a prefetched record is used only when it is still current.
func (m *Merger) ApplyPrefetched(b *wire.Batch, now int64, pf *Prefetched) (*wire.Reply, error) {
	return m.ApplyAs(b, "", now, pf)
}

// ApplyAs is ApplyPrefetched for an isolate of the namespace scope (see
// scope.go): the isolate is known as scope + b.Isolate.
func (m *Merger) ApplyAs(b *wire.Batch, scope string, now int64, pf *Prefetched) (*wire.Reply, error) {
	if err := m.Check(b); err != nil {
		return nil, err
	}
	if err := m.checkTimes(b, now); err != nil {
		return nil, err
	}
	if err := m.recovered(); err != nil {
		return nil, err
	}
	h, err := m.loadHWM(scope + b.Isolate)
	if err != nil {
		return nil, err
	}
	sum := batchSum(b)
	dup, err := checkSeq(h, b, sum)
	if err != nil {
		m.stats.SeqRefused++
		return nil, err
	}
	// The cached high-water mark's id: every batch of the isolate then uses
	// the same string, which isoState lookups compare by pointer first.
	isolate := h.id
	// Load every key first: after this point nothing can fail.
	m.applySeq++
	mark := m.applySeq
	slots := m.slots[:0]
	at := m.at[:0]
	defer func() {
		clear(slots)
		m.slots, m.at = slots[:0], at[:0]
	}()
	for i := range b.Entries {
		e := &b.Entries[i]
		st, err := m.loadKey(m.lims[e.Limiter], e.Key, pf, i)
		if err != nil {
			return nil, err
		}
		if st.mark != mark {
			st.mark, st.slotIdx = mark, int32(len(slots))
			slots = append(slots, slot{st: st, key: e.Key, maxWin: e.Window})
		}
		j := st.slotIdx
		s := &slots[j]
		s.maxWin = max(s.maxWin, e.Window)
		s.demand = addSat(s.demand, max(e.Demand, e.Delta))
		s.unmet = addSat(s.unmet, max(e.Demand-e.Delta, 0))
		at = append(at, j)
	}
	sigs := m.sigs[:0]
	defer func() {
		clear(sigs)
		m.sigs = sigs[:0]
	}()
	for i := range b.Signals {
		sg := &b.Signals[i]
		st, err := m.loadKey(m.lims[sg.Limiter], sg.Key, nil, -1)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, st)
	}
	if dup {
		m.stats.Duplicates++
	} else {
		m.stats.Batches++
		t := min(b.At, now)
		for i := range b.Entries {
			s := &slots[at[i]]
			m.applyDelta(s.st, isolate, &b.Entries[i], t, now)
		}
		for i, st := range sigs {
			m.applySignal(st, isolate, h.hash, &b.Signals[i], now)
		}
		h.seq, h.seen, h.sum = b.Seq, now, sum
		m.markHWM(h)
	}
	rp := &wire.Reply{Version: wire.Version, Seq: b.Seq, At: now, Entries: make([]wire.View, len(slots))}
	for j := range slots {
		s := &slots[j]
		v := &rp.Entries[j]
		v.Limiter, v.Key = s.st.lim.Name, s.key
		m.view(s, isolate, h.hash, now, !dup, v)
		if s.st.up != nil {
			m.addUpView(rp, s.st, s.key, isolate, now, false)
		}
	}
	for i, st := range sigs {
		if st.mark != mark { // not among the entries: its view is not there yet
			st.mark, st.slotIdx = mark, -1
			m.addUpView(rp, st, b.Signals[i].Key, isolate, now, true)
		}
	}
	if !dup {
		m.dash.applied(b, rp, now)
	}
	return rp, nil
}

// applyDelta adds one entry to st. t is the batch time for buckets.
func (m *Merger) applyDelta(st *keyState, isolate string, e *wire.Delta, t, now int64) {
	m.markKey(st)
	m.stats.DeltasApplied++
	lim := st.lim
	strict := lim.Leased()
	var me *isoState
	if strict {
		me = m.iso(st, isolate, now)
	}
	d := e.Delta
	if lim.IsBucket() {
		if me != nil {
			me.lease -= min(d, max(me.lease, 0)) // the reservation is spent
		}
		if d > 0 {
			t = max(t, now-lim.Period)
			st.tat = limitmath.AdvanceTAT(st.tat, t, d, lim.Period, st.limitFor(e.Key, now))
		}
		return
	}
	w := e.Window
	st.win, st.count, st.prev = limitmath.Roll(st.win, st.count, st.prev, w)
	switch w {
	case st.win:
		st.count = addSat(st.count, d)
	case st.win - 1:
		st.prev = addSat(st.prev, d)
	default:
		m.stats.DeltasStale++
		return
	}
	if me != nil && me.leaseWin < w && w == me.standUntil {
		// The isolate's first cost in w: it began w on a standing lease,
		// the last one told or (if that reply reached it after w began)
		// the one before; standRes covers both, and until it has seen a
		// reply for w it may admit up to that.
		me.leaseWin, me.lease, me.granted = w, me.standRes, me.standRes
	}
	if me != nil && me.leaseWin == w {
		me.lease = max(0, me.lease-d)
		me.granted = max(0, me.granted-d)
	}
}

// view fills v for slot s; when applied, it first records the isolate's
// recency and demand and (strict mode) computes its new lease.
func (m *Merger) view(s *slot, isolate string, hash uint64, now int64, applied bool, v *wire.View) {
	st, lim := s.st, s.st.lim
	P := lim.Period
	W := int64(0)
	if !lim.IsBucket() {
		W = max(limitmath.Window(now, P), s.maxWin)
	}
	var me *isoState
	switch {
	case applied && !lim.Leased():
		m.markKey(st)
		st.sk.add(hash, limitmath.Window(now, P))
	case applied:
		m.markKey(st)
		m.isoEntries -= st.prune(now)
		me = m.iso(st, isolate, now)
		if me != nil {
			if gap := now - me.seen; me.seen > 0 && gap > 0 {
				me.gap = (me.gap + gap) / 2
			}
			me.seen = now
			st.oldest = min(st.oldest, now) // in case the clock went back
			me.demand = (me.demand + min(s.demand, wire.MaxLimit)*demandScale) / 2
		}
	case lim.Leased():
		if i := st.findIso(isolate); i >= 0 {
			me = &st.isos[i]
		}
	}
	if lim.IsBucket() {
		v.TAT = st.tat
	} else {
		v.Window = W
		v.Count, v.Prev = st.windowCounts(W)
	}
	v.Isolates = max(st.recentIsolates(now), 1)
	v.Lease, v.Exhausted, v.Stand = -1, false, 0
	if !lim.Leased() {
		return
	}
	v.Lease = 0
	if me == nil {
		return
	}
	if applied {
		if lim.IsBucket() {
			m.grantBucket(st, me, s.key, now, s.unmet)
		} else {
			unmet := s.unmet
			if s.maxWin < W {
				unmet = 0 // refused in a window that is over: nothing to serve now
			}
			v.Exhausted = m.grantWindow(st, me, s.key, W, now, unmet) == 0
		}
	}
	switch {
	case lim.IsBucket():
		v.Lease = me.lease
	case me.leaseWin == W:
		v.Lease = me.granted
	}
	if me.standUntil == W+1 {
		v.Stand = me.stand
	}
}

// markKey stages st for the next Commit.
func (m *Merger) markKey(st *keyState) {
	if !st.dirty {
		st.dirty = true
		m.dirtyKeys = append(m.dirtyKeys, st)
	}
}

func (m *Merger) markHWM(h *hwmState) {
	if !h.dirty {
		h.dirty = true
		m.dirtyHWMs = append(m.dirtyHWMs, h)
	}
}

// iso returns the isolate's entry in st (adding it within the bounds), or nil.
func (m *Merger) iso(st *keyState, id string, now int64) *isoState {
	active := limitmath.Window(now, st.lim.Period)
	if !st.lim.IsBucket() {
		active = max(active, st.win)
	}
	n := len(st.isos)
	is := st.iso(id, now, active, m.opts.MaxIsolatesPerKey, func() bool { return m.isoEntries < m.opts.MaxIsolateEntries })
	m.isoEntries += len(st.isos) - n
	return is
}

// loadKey returns the cached state of (lim, key), reading it from the store
// on a miss (or taking entry i of pf, when it is still current).
func (m *Merger) loadKey(lim *wire.LimiterConfig, key string, pf *Prefetched, i int) (*keyState, error) {
	m.buf = appendKeyStorageKey(m.buf[:0], lim.Name, key)
	if st, ok := m.keys[string(m.buf)]; ok {
		return st, nil
	}
	var v []byte
	var found bool
	if p, ok := m.prefetched(pf, i); ok {
		v, found = p.value, p.found
	} else {
		var err error
		if v, found, err = m.store.Get(m.buf); err != nil {
			return nil, fmt.Errorf("coordinator: read key %q of limiter %q: %w", key, lim.Name, err)
		}
	}
	st := newKeyState(lim, string(m.buf))
	if found {
		if err := st.decode(v, m.opts.MaxIsolatesPerKey); err != nil {
			return nil, fmt.Errorf("coordinator: read key %q of limiter %q: %w", key, lim.Name, err)
		}
		m.isoEntries += len(st.isos)
	}
	m.keys[st.skey] = st
	m.residentAdd(st)
	return st, nil
}

// loadHWM returns the isolate's high-water mark (seq 0 when unknown).
func (m *Merger) loadHWM(isolate string) (*hwmState, error) {
	if h, ok := m.hwms[isolate]; ok {
		return h, nil
	}
	k := hwmStorageKey(isolate)
	v, found, err := m.store.Get([]byte(k))
	if err != nil {
		return nil, fmt.Errorf("coordinator: read high-water mark of isolate %q: %w", isolate, err)
	}
	h := &hwmState{id: isolate, hash: isoHash(isolate)}
	if found {
		if err := h.decode(v); err != nil {
			return nil, fmt.Errorf("coordinator: read high-water mark of isolate %q: %w", isolate, err)
		}
	}
	m.hwms[isolate] = h
	return h, nil
}

// Pending reports whether writes are staged for the next Commit.
func (m *Merger) Pending() bool {
	return len(m.dirtyKeys)+len(m.dirtyHWMs)+len(m.deletes) > 0
}

// Commit writes every staged change in one atomic, durable Store commit,
// then commits a checkpoint when one is due at time now (ns). When the
// commit fails the staged changes are discarded together with every cached
// state, so the Merger continues from what the Store holds; a failed
// checkpoint changes nothing and the next one covers it again.
func (m *Merger) Commit(now int64) error {
	ops, gen := m.Stage()
	var err error
	if len(ops) > 0 {
		err = m.store.Commit(ops)
	}
	m.Committed(gen, err)
	if err != nil || !m.CheckpointDue(now) {
		return err
	}
	ck := m.Checkpoint(now)
	if ops, err = ck.Ops(); err == nil {
		err = m.store.Commit(ops)
	}
	m.Checkpointed(ck, err)
	return err
}

// Stage takes every staged change out of m as Store ops (one log record,
// see wal.go), tagged with a generation, so that the caller can commit them
// while m goes on applying the next batches (pipelining). The caller must
// commit the stages in order, each after the previous one finished, and
// report each with Committed; after a failed stage, the later ones must not
// be committed.
func (m *Merger) Stage() (ops []Op, gen int64) {
	m.gen++
	gen = m.gen
	if !m.Pending() {
		return nil, gen
	}
	size := 0
	for _, k := range m.deletes {
		size += len(k) + 4
	}
	for _, st := range m.dirtyKeys {
		size += len(st.skey) + 52
		if st.persistIsos() {
			size += len(st.isos) * (maxScopedIDLen + 52)
		}
	}
	for _, h := range m.dirtyHWMs {
		size += len(h.id) + 40
	}
	rec := make([]byte, 0, size)
	ops = make([]Op, 0, len(m.deletes)+1)
	refs := m.stageRefs[:0]
	// slot returns the index in ckptOps of the key logged with epoch e
	// (adding one for its first log in this checkpoint).
	slot := func(e *int64, idx *int32) int32 {
		if *e != m.ckptEpoch {
			*e, *idx = m.ckptEpoch, int32(len(m.ckptOps))
			m.ckptOps = append(m.ckptOps, Op{})
			m.ckptCount++
		}
		return *idx
	}
	for _, k := range m.deletes {
		// Deleted now (GC visits records) and logged, so that a replay of
		// older log records cannot bring the key back.
		ops = append(ops, Op{Key: k, Delete: true})
		m.ckptOps = append(m.ckptOps, Op{Key: k, Delete: true})
		rec = appendLogDelete(rec, k)
	}
	for _, st := range m.dirtyKeys {
		m.buf = st.encode(m.buf[:0])
		r := stageRef{idx: slot(&st.epoch, &st.ckptSlot), kOff: len(rec)}
		rec, r.vOff = appendLogSet(rec, st.skey, m.buf)
		refs = append(refs, r)
		st.dirty, st.gen = false, gen
	}
	for _, h := range m.dirtyHWMs {
		m.buf = append(append(m.buf[:0], prefixHWM), h.id...)
		n := len(m.buf)
		m.buf = h.encode(m.buf)
		r := stageRef{idx: slot(&h.epoch, &h.ckptSlot), kOff: len(rec)}
		rec, r.vOff = appendLogSet(rec, m.buf[:n], m.buf[n:])
		refs = append(refs, r)
		h.dirty, h.gen = false, gen
	}
	// rec is complete: the checkpoint's ops may now alias it.
	for i, r := range refs {
		end := len(rec)
		if i+1 < len(refs) {
			end = refs[i+1].kOff
		}
		m.ckptOps[r.idx] = logOpAt(rec, r.kOff, r.vOff, end)
	}
	clear(refs)
	m.stageRefs = refs[:0]
	m.ckptBytes += int64(len(rec))
	ops = append(ops, Op{Key: logKey(gen), Value: rec})
	clear(m.dirtyKeys)
	clear(m.dirtyHWMs)
	m.dirtyKeys, m.dirtyHWMs, m.deletes = m.dirtyKeys[:0], m.dirtyHWMs[:0], nil
	return ops, gen
}

// CheckpointDue reports whether a checkpoint is due at time now (ns): see
// MergerOptions.CheckpointKeys, CheckpointBytes and CheckpointInterval.
func (m *Merger) CheckpointDue(now int64) bool {
	return m.ckptCount >= m.opts.CheckpointKeys || m.ckptBytes >= m.opts.CheckpointBytes ||
		(m.ckptCount > 0 && now-m.ckptAt >= m.opts.CheckpointInterval)
}

// Checkpoint starts a checkpoint of everything staged so far (up to stage
// gen): its Ops write the newest logged state of each key and isolate to
// its own record and delete the log up to gen, as one set of Store ops
// (Stage keeps them as it logs: one op per key, aliasing the log records).
// Ops reads nothing of m, so it may run on another goroutine while m goes
// on. Commit the ops only once stage gen is durable, in order (chunks may
// be committed one after the other, the log deletion last), and report the
// outcome with Checkpointed.
func (m *Merger) Checkpoint(now int64) *CheckpointOps {
	ops := append(m.ckptCarry, m.ckptOps...)
	ck := &CheckpointOps{ops: ops, gen: m.gen, aborts: m.aborts}
	m.ckptOps, m.ckptCarry = nil, nil
	m.ckptEpoch++
	m.ckptCount, m.ckptBytes, m.ckptAt = 0, 0, now
	return ck
}

// CheckpointOps is a checkpoint taken by Merger.Checkpoint.
type CheckpointOps struct {
	ops    []Op
	gen    int64
	aborts int64 // Merger.aborts when taken
}

// Ops returns the checkpoint's Store ops (see Merger.Checkpoint); the last
// one deletes the log it covers.
func (ck *CheckpointOps) Ops() ([]Op, error) {
	return append(ck.ops[:len(ck.ops):len(ck.ops)], Op{Key: []byte{prefixLog}, End: logKey(ck.gen + 1), Delete: true}), nil
}

// stageRef locates, in the log record being built, the op of one key.
type stageRef struct {
	idx        int32 // index in Merger.ckptOps
	kOff, vOff int   // offsets of the op and of its value length
}

func (m *Merger) resetCkpt() {
	m.ckptOps, m.ckptCarry = nil, nil
	m.ckptEpoch++
	m.ckptCount, m.ckptBytes = 0, 0
}

// Checkpointed reports the outcome of committing ck. On success the states
// it wrote may leave the cache. On error nothing changed in the store (the
// ops are atomic), so the next checkpoint covers ck's log records again.
func (m *Merger) Checkpointed(ck *CheckpointOps, err error) {
	if err != nil {
		if ck.aborts != m.aborts {
			return // the log is replayed from the store instead (Recover)
		}
		m.ckptCarry = append(ck.ops, m.ckptCarry...)
		m.ckptCount = max(m.ckptCount, m.opts.CheckpointKeys) // due again
		return
	}
	m.stats.Checkpoints++
	m.ckptDone = max(m.ckptDone, ck.gen)
	m.evict()
}

// Committed reports the outcome of committing the stage gen. On error every
// cached state is dropped (including those of later stages, which must then
// fail too). On success, cached states no longer needed may be evicted.
func (m *Merger) Committed(gen int64, err error) {
	if err != nil {
		m.Abort()
		return
	}
	m.evict()
}

// Abort discards every staged change (and the cache, which holds them); the
// next operation first replays the log (Recover).
func (m *Merger) Abort() {
	for _, st := range m.dirtyKeys {
		st.dirty = false
	}
	for _, h := range m.dirtyHWMs {
		h.dirty = false
	}
	m.dirtyKeys, m.dirtyHWMs, m.deletes = m.dirtyKeys[:0], m.dirtyHWMs[:0], nil
	m.dropCache()
	m.resetCkpt()
	m.recover = true
	m.aborts++
}

// Aborts returns how many times the cached state was dropped; a stage built
// while Aborts was lower than after a failure rests on discarded state.
func (m *Merger) Aborts() int64 { return m.aborts }

func (m *Merger) dropCache() {
	m.residentDropAll()
	m.keys = map[string]*keyState{}
	m.hwms = map[string]*hwmState{}
	m.isoEntries = 0
}

// evict trims the caches to 7/8 of their caps, dropping only states whose
// last change is checkpointed (in its own record, so a later read of the
// record is current).
func (m *Merger) evict() {
	// A pass that stopped short of the target found nothing more to evict;
	// until a checkpoint lands, another would only scan the same states.
	if len(m.keys) > m.opts.MaxCachedKeys && m.evictStuck != m.ckptDone {
		target := m.opts.MaxCachedKeys - m.opts.MaxCachedKeys/8
		var seq int64
		if m.res != nil {
			seq = m.res.seq.Add(1)
		}
		for k, st := range m.keys {
			if len(m.keys) <= target {
				break
			}
			if st.dirty || st.gen > m.ckptDone {
				continue
			}
			m.isoEntries -= len(st.isos)
			delete(m.keys, k)
			m.residentEvicted(st, seq)
		}
		m.evictStuck = -1
		if len(m.keys) > target {
			m.evictStuck = m.ckptDone
		}
	}
	if len(m.hwms) > m.opts.MaxCachedIsolates {
		target := m.opts.MaxCachedIsolates - m.opts.MaxCachedIsolates/8
		for k, h := range m.hwms {
			if len(m.hwms) <= target {
				break
			}
			if h.dirty || h.gen > m.ckptDone {
				continue
			}
			delete(m.hwms, k)
		}
	}
}

// CachedKeys returns the number of key states in memory.
func (m *Merger) CachedKeys() int { return len(m.keys) }

// LeasesOutstanding returns the sum of the active strict leases of the
// cached keys at time now, in cost units.
func (m *Merger) LeasesOutstanding(now int64) int64 {
	var sum int64
	for _, st := range m.keys {
		if !st.lim.Leased() {
			continue
		}
		w := max(limitmath.Window(now, st.lim.Period), st.win)
		for i := range st.isos {
			sum = addSat(sum, st.reservation(&st.isos[i], w))
		}
	}
	return sum
}
