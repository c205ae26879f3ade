package history

import (
	"encoding/binary"
	"fmt"
)

// The stored forms the stores share: a bucket's counts and a kept key's
// view as varints, and a series as bytes (the limiter's name with its
// length, then 't' for the total or 'k' and the key).

// AppendCounts appends c as three uvarints (admitted, denied, paused;
// negative values are stored as 0).
func AppendCounts(dst []byte, c Counts) []byte {
	dst = binary.AppendUvarint(dst, uint64(max(c.Admitted, 0)))
	dst = binary.AppendUvarint(dst, uint64(max(c.Denied, 0)))
	return binary.AppendUvarint(dst, uint64(max(c.Paused, 0)))
}

// DecodeCounts decodes what AppendCounts wrote.
func DecodeCounts(b []byte) (Counts, error) {
	var v [3]int64
	for i := range v {
		x, n := binary.Uvarint(b)
		if n <= 0 || x > 1<<63-1 {
			return Counts{}, fmt.Errorf("%w: counts", ErrCorrupt)
		}
		v[i], b = int64(x), b[n:]
	}
	return Counts{Admitted: v[0], Denied: v[1], Paused: v[2]}, nil
}

// AppendKept appends k without its key: six varints.
func AppendKept(dst []byte, k *Kept) []byte {
	for _, x := range [...]int64{k.Window, k.Count, k.Prev, k.TAT, k.At, k.Seen} {
		dst = binary.AppendVarint(dst, x)
	}
	return dst
}

// DecodeKept decodes what AppendKept wrote, for key.
func DecodeKept(key string, b []byte) (Kept, error) {
	var v [6]int64
	for i := range v {
		x, n := binary.Varint(b)
		if n <= 0 {
			return Kept{}, fmt.Errorf("%w: kept key %q", ErrCorrupt, key)
		}
		v[i], b = x, b[n:]
	}
	return Kept{Key: key, Window: v[0], Count: v[1], Prev: v[2], TAT: v[3], At: v[4], Seen: v[5]}, nil
}

// AppendSeries appends s: uvarint(len limiter), limiter, then 't' (the
// total) or 'k' and the key.
func AppendSeries(dst []byte, s Series) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s.Limiter)))
	dst = append(dst, s.Limiter...)
	if s.Total {
		return append(dst, 't')
	}
	dst = append(dst, 'k')
	return append(dst, s.Key...)
}
