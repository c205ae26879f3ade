package merge

import ()

// The commit protocol, in the spirit of raft's Ready/Advance: Ready hands
// out what Apply changed as one stage (a log record, wal.go) and, when
// one is due, a checkpoint (the logged states to their own records); the
// caller writes them (the stages in order, a checkpoint after the stage it
// follows) and reports each outcome with Advance. Commit does both in one
// call for callers without a pipeline.

// Ready is what a Merger has for its caller to write.
type Ready struct {
	// Gen identifies the stage; give it back in Done.Gen.
	Gen int64
	// Ops are the stage's ops, to commit atomically and durably (nil:
	// nothing changed). Stages must be committed in order, each after the
	// previous one finished; after a failed one, the later ones must not
	// be committed (their Done carries the failure).
	Ops []Op
	// Aborts is the number of times the cached state was dropped when the
	// stage was cut (a stage cut before a failed one was aborted builds on
	// state that never became durable).
	Aborts int64
	// Checkpoint is a checkpoint due now, when the caller said none is in
	// flight: commit its Ops (they read nothing of the Merger, so from
	// another goroutine) after the stage's, and report it in a Done.
	Checkpoint *CheckpointOps
	// Late: a checkpoint is due while the caller's previous one is still
	// in flight (it should stop resting between chunks).
	Late bool
}

// Done is the outcome of writing part of a Ready: the stage Gen, or (with
// Checkpoint set) the checkpoint.
type Done struct {
	Gen        int64
	Checkpoint *CheckpointOps
	Err        error
}

// Ready cuts a stage of everything applied since the last Ready and, unless
// checkpointInFlight, starts a checkpoint when one is due at now (ns).
func (m *Merger) Ready(now int64, checkpointInFlight bool) Ready {
	ops, gen := m.stage()
	rd := Ready{Gen: gen, Ops: ops, Aborts: m.aborts}
	due := m.CheckpointDue(now)
	rd.Late = checkpointInFlight && due
	if !checkpointInFlight && due {
		rd.Checkpoint = m.Checkpoint(now)
	}
	return rd
}

// Advance reports the outcome of writing a stage or a checkpoint that Ready
// handed out. A failed stage drops every staged change and the cache (the
// Merger continues from what the Store holds, replaying the log first); a
// failed checkpoint changes nothing (the next one covers its ops again).
func (m *Merger) Advance(d Done) {
	if d.Checkpoint != nil {
		m.checkpointed(d.Checkpoint, d.Err)
		return
	}
	m.committed(d.Gen, d.Err)
}

// pending reports whether writes are staged for the next Commit.
func (m *Merger) pending() bool {
	return len(m.dirtyKeys)+len(m.dirtyHWMs)+len(m.deletes) > 0
}

// Commit writes every staged change in one atomic, durable Store commit,
// then commits a checkpoint when one is due at time now (ns). When the
// commit fails the staged changes are discarded together with every cached
// state, so the Merger continues from what the Store holds; a failed
// checkpoint changes nothing and the next one covers it again.
func (m *Merger) Commit(now int64) error {
	ops, gen := m.stage()
	var err error
	if len(ops) > 0 {
		err = m.store.Commit(ops)
	}
	m.committed(gen, err)
	if err != nil || !m.CheckpointDue(now) {
		return err
	}
	ck := m.Checkpoint(now)
	if ops, err = ck.Ops(); err == nil {
		err = m.store.Commit(ops)
	}
	m.checkpointed(ck, err)
	return err
}

// stage takes every staged change out of m as Store ops (one log record,
// see wal.go), tagged with a generation, so that the caller can commit them
// while m goes on applying the next batches (pipelining). The caller must
// commit the stages in order, each after the previous one finished, and
// report each with committed; after a failed stage, the later ones must not
// be committed.
func (m *Merger) stage() (ops []Op, gen int64) {
	m.gen++
	gen = m.gen
	if !m.pending() {
		return nil, gen
	}
	size := 0
	for _, k := range m.deletes {
		size += len(k) + 4
	}
	for _, st := range m.dirtyKeys {
		size += len(st.skey) + 52
		if st.persistIsos() {
			size += len(st.isos) * (MaxScopedIDLen + 52)
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
		(m.ckptCount > 0 && now-m.ckptAt >= int64(m.opts.CheckpointInterval))
}

// Checkpoint starts a checkpoint of everything staged so far (up to stage
// gen): its Ops write the newest logged state of each key and isolate to
// its own record and delete the log up to gen, as one set of Store ops
// (stage keeps them as it logs: one op per key, aliasing the log records).
// Ops reads nothing of m, so it may run on another goroutine while m goes
// on. Commit the ops only once stage gen is durable, in order (chunks may
// be committed one after the other, the log deletion last), and report the
// outcome with checkpointed.
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

// checkpointed reports the outcome of committing ck. On success the states
// it wrote may leave the cache. On error nothing changed in the store (the
// ops are atomic), so the next checkpoint covers ck's log records again.
func (m *Merger) checkpointed(ck *CheckpointOps, err error) {
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

// committed reports the outcome of committing the stage gen. On error every
// cached state is dropped (including those of later stages, which must then
// fail too). On success, cached states no longer needed may be evicted.
func (m *Merger) committed(gen int64, err error) {
	if err != nil {
		m.abort()
		return
	}
	m.evict()
}

// abort discards every staged change (and the cache, which holds them); the
// next operation first replays the log (Recover).
func (m *Merger) abort() {
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
