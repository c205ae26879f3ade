package merge

import (
	"encoding/binary"
	"fmt"
)

// The write path is log-structured. A group commit writes ONE store record,
// the group's log record, holding the new full state of every key and
// isolate high-water mark the group changed (and the keys GC deleted):
//
//	'l' gen (8 bytes, big endian) -> ops: 's' uvarint(len k) k uvarint(len v) v
//	                                  or 'd' uvarint(len k) k
//
// so a commit costs one memtable insert and one synced WAL write, however
// many keys the group touched. A checkpoint later writes the states logged
// since the previous one to their own records ('k' and 'h', see state.go)
// and deletes the log records it covers, in one atomic batch; keys are
// evicted from the Merger's cache only once checkpointed, so a read of a
// record not in the cache is always current. Replaying the log in order
// over the records rebuilds the latest state: each log op carries a full
// state, so replaying one twice, or over a newer checkpoint of the same
// state, changes nothing. NewMerger replays what a crash left.
const (
	prefixLog = 'l'
	logSet    = 's'
	logDelete = 'd'
)

// logKey returns the store key of the log record of stage gen.
func logKey(gen int64) []byte {
	var k [9]byte
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], uint64(gen))
	return k[:]
}

// appendLogSet appends a set of key to value, and returns where the value's
// length starts (for logOpAt).
func appendLogSet[K string | []byte](dst []byte, key K, value []byte) ([]byte, int) {
	dst = append(dst, logSet)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	v := len(dst)
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	return append(dst, value...), v
}

// logOpAt returns the set op appended to rec at offset k (value length at
// v, op ending at end) as a Store op whose key and value alias rec.
func logOpAt(rec []byte, k, v, end int) Op {
	_, n := binary.Uvarint(rec[k+1:])
	key := rec[k+1+n : v : v]
	_, n = binary.Uvarint(rec[v:])
	return Op{Key: key, Value: rec[v+n : end : end]}
}

// appendLogDelete appends a delete of key.
func appendLogDelete(dst []byte, key []byte) []byte {
	dst = append(dst, logDelete)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// walkLog calls fn for each op of the log record rec (value nil for a
// delete); key and value alias rec.
func walkLog(rec []byte, fn func(key, value []byte, del bool)) error {
	d := decoder{b: rec}
	for len(d.b) > 0 {
		kind := d.b[0]
		d.b = d.b[1:]
		if kind != logSet && kind != logDelete {
			return errCorrupt
		}
		k := d.bytes()
		var v []byte
		if kind == logSet {
			v = d.bytes()
		}
		if d.err != nil {
			return d.err
		}
		fn(k, v, kind == logDelete)
	}
	return nil
}

// bytes reads a uvarint length and that many bytes.
func (d *decoder) bytes() []byte {
	n := d.uvarint(uint64(len(d.b)))
	if d.err != nil || uint64(len(d.b)) < n {
		d.err = errCorrupt
		d.b = nil
		return nil
	}
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}

// replayLog applies every log record in store to the records it names, in
// order, and deletes the log, in one synced commit. It returns the number of
// log records replayed (0: nothing to do, no commit).
func replayLog(store Store) (int, error) {
	if store == nil {
		return 0, nil // a Merger used only to Check batches
	}
	type final struct {
		v   []byte
		del bool
	}
	last := map[string]final{}
	records := 0
	var bad error
	err := store.Scan([]byte{prefixLog}, nil, func(k, v []byte) bool {
		records++
		if err := walkLog(v, func(key, value []byte, del bool) {
			last[string(key)] = final{v: append([]byte(nil), value...), del: del}
		}); err != nil {
			bad = fmt.Errorf("merge: log record %x: %w", k, err)
			return false
		}
		return true
	})
	if err == nil {
		err = bad
	}
	if err != nil || records == 0 {
		return 0, err
	}
	ops := make([]Op, 0, len(last)+1)
	for k, f := range last {
		ops = append(ops, Op{Key: []byte(k), Value: f.v, Delete: f.del})
	}
	ops = append(ops, Op{Key: []byte{prefixLog}, End: []byte{prefixLog + 1}, Delete: true})
	if err := store.Commit(ops); err != nil {
		return 0, fmt.Errorf("merge: replay log: %w", err)
	}
	return records, nil
}
