package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/edgelimit/edgelimit/coordinator/history"
)

// The usage history (package history) beside the merge's records, under
// prefixes of its own (the merge uses 'k', 'h' and 'l', and neither its
// GC nor its log replay reads these):
//
//	'H' res bucket(8 bytes, big endian) series -> counts (history.AppendCounts)
//	'V' uvarint(len limiter) limiter key      -> kept key's view (history.AppendKept)
//
// Buckets lead the history keys, so the records past the retention are
// the first of their resolution.
const (
	prefixHistory = 'H'
	prefixKept    = 'V'
)

var _ history.Store = (*Store)(nil)

func historyKey(res history.Resolution, bucket int64, s history.Series) []byte {
	k := make([]byte, 0, 16+len(s.Limiter)+len(s.Key))
	k = append(k, prefixHistory, byte(res))
	k = binary.BigEndian.AppendUint64(k, uint64(bucket))
	return history.AppendSeries(k, s)
}

func keptPrefix(limiter string) []byte {
	k := []byte{prefixKept}
	k = binary.AppendUvarint(k, uint64(len(limiter)))
	return append(k, limiter...)
}

// AddHistory implements history.Store: it reads each point's bucket, adds
// the point and writes them all in one synced batch (all or nothing, so id
// is not needed).
func (s *Store) AddHistory(_ string, pts []history.Point) error {
	sum := map[string]history.Counts{}
	var order []string
	for _, p := range pts {
		if !p.Res.Valid() || p.Bucket < 0 {
			return errors.New("pebblestore: history: bad resolution or bucket")
		}
		k := string(historyKey(p.Res, p.Bucket, p.Series))
		c, ok := sum[k]
		if !ok {
			order = append(order, k)
		}
		c.Add(p.Counts)
		sum[k] = c
	}
	if err := s.space.check(); err != nil {
		return err
	}
	s.histMu.Lock()
	defer s.histMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	var val []byte
	for _, k := range order {
		c := sum[k]
		old, found, err := s.Get([]byte(k))
		if err != nil {
			return err
		}
		if found {
			if oc, err := history.DecodeCounts(old); err == nil {
				c.Add(oc) // a record that does not decode is replaced
			}
		}
		val = history.AppendCounts(val[:0], c)
		if err := b.Set([]byte(k), val, nil); err != nil {
			return fmt.Errorf("pebblestore: history: %w", err)
		}
	}
	if err := b.Commit(s.writeOpts); err != nil {
		return fmt.Errorf("pebblestore: history: %w", err)
	}
	return nil
}

// ReadHistory implements history.Store.
func (s *Store) ReadHistory(res history.Resolution, ser history.Series, from, to int64) ([]history.Counts, error) {
	if err := history.CheckRange(res, from, to); err != nil {
		return nil, fmt.Errorf("pebblestore: %w", err)
	}
	out := make([]history.Counts, to-from)
	for b := max(from, 0); b < to; b++ {
		v, found, err := s.Get(historyKey(res, b, ser))
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		c, err := history.DecodeCounts(v)
		if err != nil {
			return nil, fmt.Errorf("pebblestore: %w", err)
		}
		out[b-from] = c
	}
	return out, nil
}

// TrimHistory implements history.Store: it deletes the records of the
// buckets before before one by one (at most an hour of buckets per call
// once running: the Recorder trims once an hour). Point deletions, not a
// range deletion: range tombstones in the memtable slow every later Get
// until it is flushed.
func (s *Store) TrimHistory(res history.Resolution, before int64) error {
	if before <= 0 {
		return nil
	}
	if err := s.space.check(); err != nil {
		return err
	}
	lo := []byte{prefixHistory, byte(res)}
	hi := binary.BigEndian.AppendUint64([]byte{prefixHistory, byte(res)}, uint64(before))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("pebblestore: history: trim: %w", err)
	}
	b := s.db.NewBatch()
	defer b.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := b.Delete(it.Key(), nil); err != nil {
			it.Close()
			return fmt.Errorf("pebblestore: history: trim: %w", err)
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("pebblestore: history: trim: %w", err)
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(s.writeOpts); err != nil {
		return fmt.Errorf("pebblestore: history: trim: %w", err)
	}
	return nil
}

// SaveKept implements history.Store.
func (s *Store) SaveKept(limiter string, kept []history.Kept, gone []string) error {
	if err := s.space.check(); err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	p := keptPrefix(limiter)
	var val []byte
	for _, g := range gone {
		if err := b.Delete(append(p[:len(p):len(p)], g...), nil); err != nil {
			return fmt.Errorf("pebblestore: kept keys: %w", err)
		}
	}
	for i := range kept {
		val = history.AppendKept(val[:0], &kept[i])
		if err := b.Set(append(p[:len(p):len(p)], kept[i].Key...), val, nil); err != nil {
			return fmt.Errorf("pebblestore: kept keys: %w", err)
		}
	}
	if err := b.Commit(s.writeOpts); err != nil {
		return fmt.Errorf("pebblestore: kept keys: %w", err)
	}
	return nil
}

// LoadKept implements history.Store; records that do not decode are
// skipped.
func (s *Store) LoadKept(limiter string) ([]history.Kept, error) {
	p := keptPrefix(limiter)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: kept keys: %w", err)
	}
	var out []history.Kept
	for ok := it.First(); ok; ok = it.Next() {
		if k, err := history.DecodeKept(string(it.Key()[len(p):]), it.Value()); err == nil {
			out = append(out, k)
		}
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("pebblestore: kept keys: %w", err)
	}
	return out, nil
}
