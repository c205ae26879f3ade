package merge

// An in-memory SharedStore, on which the merge tests listed in
// sharedparity_test.go run against a SharedMerger. It follows the
// SharedStore comments (shared.go) and, where they are silent,
// coordinator/redisstore (redis.go ReadShared, write.go subScript,
// markScript, WriteShared, AdvanceMarks) with Options.Wait 0 (no WAIT). It
// is no CountingStore: approximate windowed keys are read, merged and
// written as leased ones are (Redis counts them in place: count.go, tested
// on a real cluster by the coordinator package's TestMergeOnRedisCluster). a record's version starts at 1 and grows by one
// per write (absent: 0); every record, mark and high-water mark has a TTL,
// expired by the store's clock (the test's fake clock: Redis's clock is the
// coordinator's); Commit only deletes single keys.

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"sync"
)

const sharedMemBuckets = 16

type memRec struct {
	val []byte
	ver uint64
	exp int64 // expiry (store clock, ns); 0: none
}

type memMark struct {
	seq int64
	exp int64
}

type memHWM struct {
	seq int64
	val []byte
	exp int64
}

// sharedMemStore is a SharedStore in memory.
type sharedMemStore struct {
	mu    sync.Mutex
	clock func() int64
	recs  map[string]memRec   // key records, by storage key
	marks map[MarkRef]memMark // {el:B}m<iso>
	hwms  map[string]memHWM   // el:h<iso>, by scoped isolate id
	other map[string][]byte   // any other key (none is written: Commit refuses sets, as Redis's)
}

func newSharedMemStore(clock func() int64) *sharedMemStore {
	return &sharedMemStore{clock: clock, recs: map[string]memRec{}, marks: map[MarkRef]memMark{},
		hwms: map[string]memHWM{}, other: map[string][]byte{}}
}

// redisTTL is the expiry of a record written now with a TTL of ttl ns, as
// redisstore's ms() and PX: whole milliseconds, at least 1.
func (s *sharedMemStore) expiry(now, ttl int64) int64 { return now + max(ttl/1e6, 1)*1e6 }

func alive(exp, now int64) bool { return exp == 0 || now < exp }

func (s *sharedMemStore) rec(k string, now int64) (memRec, bool) {
	r, ok := s.recs[k]
	if ok && !alive(r.exp, now) {
		delete(s.recs, k)
		return memRec{}, false
	}
	return r, ok
}

func (s *sharedMemStore) mark(m map[MarkRef]memMark, ref MarkRef, now int64) (memMark, bool) {
	v, ok := m[ref]
	if ok && !alive(v.exp, now) {
		delete(m, ref)
		return memMark{}, false
	}
	return v, ok
}

func (s *sharedMemStore) hwm(iso string, now int64) (memHWM, bool) {
	h, ok := s.hwms[iso]
	if ok && !alive(h.exp, now) {
		delete(s.hwms, iso)
		return memHWM{}, false
	}
	return h, ok
}

// Bucket: FNV-1a 64 of the storage key, mod sharedMemBuckets (as redisstore).
func (s *sharedMemStore) Bucket(key []byte) int {
	h := uint64(14695981039346656037)
	for _, c := range key {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return int(h % sharedMemBuckets)
}

func (s *sharedMemStore) Get(key []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	switch {
	case len(key) > 0 && key[0] == prefixKey:
		r, ok := s.rec(string(key), now)
		if !ok {
			return nil, false, nil
		}
		return bytes.Clone(r.val), true, nil
	case len(key) > 0 && key[0] == prefixHWM:
		h, ok := s.hwm(string(key[1:]), now)
		return bytes.Clone(h.val), ok, nil
	}
	v, ok := s.other[string(key)]
	return bytes.Clone(v), ok, nil
}

// Commit deletes single keys; anything else is refused (redisstore.Commit).
func (s *sharedMemStore) Commit(ops []Op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range ops {
		if !op.Delete || op.End != nil {
			return errors.New("sharedmem: only single-key deletes are committed directly")
		}
		k := string(op.Key)
		switch {
		case len(k) > 0 && k[0] == prefixKey:
			delete(s.recs, k)
		case len(k) > 0 && k[0] == prefixHWM:
			delete(s.hwms, k[1:])
		default:
			delete(s.other, k)
		}
	}
	return nil
}

// Scan visits key records and high-water marks (redisstore.Scan).
func (s *sharedMemStore) Scan(prefix, start []byte, fn func(key, value []byte) bool) error {
	if len(prefix) == 0 || (prefix[0] != prefixKey && prefix[0] != prefixHWM) {
		return nil
	}
	s.mu.Lock()
	now := s.clock()
	var ks []string
	vs := map[string][]byte{}
	for k := range s.recs {
		if r, ok := s.rec(k, now); ok && bytes.HasPrefix([]byte(k), prefix) && k >= string(start) {
			ks = append(ks, k)
			vs[k] = bytes.Clone(r.val)
		}
	}
	for iso := range s.hwms {
		k := hwmStorageKey(iso)
		if h, ok := s.hwm(iso, now); ok && bytes.HasPrefix([]byte(k), prefix) && k >= string(start) {
			ks = append(ks, k)
			vs[k] = bytes.Clone(h.val)
		}
	}
	s.mu.Unlock()
	sort.Strings(ks)
	for _, k := range ks {
		if !fn([]byte(k), vs[k]) {
			break
		}
	}
	return nil
}

func (s *sharedMemStore) Close() error { return nil }

func (s *sharedMemStore) ReadShared(_ context.Context, keys [][]byte, marks []MarkRef, isolates []string) ([]Versioned, []int64, [][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	vals := make([]Versioned, len(keys))
	for i, k := range keys {
		if r, ok := s.rec(string(k), now); ok {
			vals[i] = Versioned{Value: bytes.Clone(r.val), Version: r.ver}
		}
	}
	seqs := make([]int64, len(marks))
	for i, m := range marks {
		if v, ok := s.mark(s.marks, m, now); ok {
			seqs[i] = v.seq
		}
	}
	hv := make([][]byte, len(isolates))
	for i, iso := range isolates {
		if h, ok := s.hwm(iso, now); ok {
			hv[i] = bytes.Clone(h.val)
		}
	}
	return vals, seqs, hv, nil
}

// WriteShared: subScript per SubWrite (Wait 0: a SubWrite with neither
// marks nor keys needs no call and is applied).
func (s *sharedMemStore) WriteShared(_ context.Context, subs []SubWrite) ([]SubOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	outs := make([]SubOutcome, len(subs))
	for i := range subs {
		w := &subs[i]
		if len(w.Marks) == 0 && len(w.Keys) == 0 {
			continue
		}
		for _, k := range w.Keys {
			if s.Bucket(k) != w.Bucket {
				return nil, errors.New("sharedmem: key not in its SubWrite's bucket")
			}
		}
		outs[i] = s.subWrite(w, now)
	}
	return outs, nil
}

func (s *sharedMemStore) subWrite(w *SubWrite, now int64) SubOutcome {
	for _, m := range w.Marks {
		ref := MarkRef{Bucket: w.Bucket, Isolate: m.Isolate}
		if cur, ok := s.mark(s.marks, ref, now); ok && cur.seq >= m.Seq {
			cur.exp = s.expiry(now, m.TTL) // PEXPIRE
			s.marks[ref] = cur
			return SubDuplicate
		}
	}
	for j, k := range w.Keys {
		r, ok := s.rec(string(k), now)
		if ok && r.ver != w.Versions[j] || !ok && w.Versions[j] != 0 {
			return SubConflict
		}
	}
	for j, k := range w.Keys {
		s.recs[string(k)] = memRec{val: bytes.Clone(w.Values[j]), ver: w.Versions[j] + 1, exp: s.expiry(now, w.TTLs[j])}
	}
	for _, m := range w.Marks {
		s.marks[MarkRef{Bucket: w.Bucket, Isolate: m.Isolate}] = memMark{seq: m.Seq, exp: s.expiry(now, m.TTL)}
	}
	for _, m := range w.Confirm {
		ref := MarkRef{Bucket: w.Bucket, Isolate: m.Isolate}
		if cur, ok := s.mark(s.marks, ref, now); ok {
			cur.exp = s.expiry(now, m.TTL)
			s.marks[ref] = cur
		}
	}
	return SubApplied
}

// AdvanceMarks: markScript per mark (Wait 0: a Dup mark needs no call).
func (s *sharedMemStore) AdvanceMarks(_ context.Context, marks []MarkSet) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	for _, m := range marks {
		if m.Dup {
			continue
		}
		cur, ok := s.hwm(m.Isolate, now)
		switch {
		case ok && cur.seq == m.Seq:
			cur.exp = s.expiry(now, m.TTL)
			s.hwms[m.Isolate] = cur
		case ok && cur.seq > m.Seq:
		default:
			s.hwms[m.Isolate] = memHWM{seq: m.Seq, val: bytes.Clone(m.Value), exp: s.expiry(now, m.TTL)}
		}
	}
	return nil
}

var _ SharedStore = (*sharedMemStore)(nil)

// seedView returns a Merger holding every key record and high-water mark
// of s (as a SharedMerger's group would read them) at now: what a test
// inspects through withMerger in shared mode. Changes to it are not
// written back.
func (s *sharedMemStore) seedView(m *Merger, now int64) {
	s.mu.Lock()
	type kv struct {
		k string
		v Versioned
	}
	var ks []kv
	for k := range s.recs {
		if r, ok := s.rec(k, now); ok {
			ks = append(ks, kv{k, Versioned{Value: bytes.Clone(r.val), Version: r.ver}})
		}
	}
	hs := map[string][]byte{}
	for iso := range s.hwms {
		if h, ok := s.hwm(iso, now); ok {
			hs[iso] = bytes.Clone(h.val)
		}
	}
	s.mu.Unlock()
	sort.Slice(ks, func(i, j int) bool { return ks[i].k < ks[j].k })
	for _, e := range ks {
		name, _, ok := splitKeyStorageKey([]byte(e.k))
		if !ok || m.lims[name] == nil {
			continue
		}
		m.seedKey(m.lims[name], e.k, e.v, now)
	}
	for iso, v := range hs {
		h := &hwmState{id: iso, hash: isoHash(iso)}
		if h.decode(v) == nil {
			m.hwms[iso] = h
		}
	}
}
