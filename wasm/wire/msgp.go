package wire

import (
	"errors"
	"math"
	"strconv"
)

// This file is a small msgpack codec for the subset the wire types use
// (maps, arrays, strings, integers, booleans, float64, nil). It has no
// reflection and no package-level tables, so it compiles under TinyGo with
// -scheduler=none and keeps the guest module small: msgpack/v5's
// Encoder/Decoder add about 130 KB to the module (a build with them measured
// 162 KB, against the 150 KB budget). The host tests check every type against
// msgpack/v5 in both directions (golden_test.go).

// ErrShort is returned when the input ends inside a value.
var ErrShort = errors.New("wire: msgpack input ends early")

// maxDepth bounds nesting when skipping unknown values.
const maxDepth = 16

// AppendMapHeader appends a map header for n pairs.
func AppendMapHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xde, byte(n>>8), byte(n))
	default:
		return append(b, 0xdf, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// AppendArrayHeader appends an array header for n elements.
func AppendArrayHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xdc, byte(n>>8), byte(n))
	default:
		return append(b, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// AppendString appends s as a msgpack str.
func AppendString[S string | []byte](b []byte, s S) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xda, byte(n>>8), byte(n))
	default:
		b = append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

// AppendInt appends v in the smallest msgpack integer form, preferring the
// signed forms (0xd0-0xd3) above 127; every msgpack decoder, msgpack/v5's
// included, reads them as integers.
func AppendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0 && v <= 127:
		return append(b, byte(v))
	case v < 0 && v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8 && v <= math.MaxInt8:
		return append(b, 0xd0, byte(v))
	case v >= 0 && v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v >= math.MinInt16 && v <= math.MaxInt16:
		return append(b, 0xd1, byte(v>>8), byte(v))
	case v >= 0 && v <= math.MaxUint16:
		return append(b, 0xcd, byte(v>>8), byte(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		return append(b, 0xd2, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	case v >= 0 && v <= math.MaxUint32:
		return append(b, 0xce, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	default:
		return appendU64(append(b, 0xd3), uint64(v))
	}
}

// AppendBool appends a msgpack bool.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

func appendU64(b []byte, u uint64) []byte {
	return append(b, byte(u>>56), byte(u>>48), byte(u>>40), byte(u>>32),
		byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
}

// Reader decodes msgpack values from a byte slice. The first error sticks:
// later reads return zero values, and Err reports it.
type Reader struct {
	b   []byte
	off int
	err error
}

// NewReader returns a Reader over b. It does not copy b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Reset points r at b and clears its error.
func (r *Reader) Reset(b []byte) { r.b, r.off, r.err = b, 0, nil }

// Err returns the first decoding error, or nil.
func (r *Reader) Err() error { return r.err }

// Done reports an error if bytes remain after the last value.
func (r *Reader) Done() error {
	if r.err == nil && r.off != len(r.b) {
		r.err = errors.New("wire: " + strconv.Itoa(len(r.b)-r.off) + " trailing bytes after the message")
	}
	return r.err
}

// fail records a decoding error. Error paths are kept out of line (here
// and in SetErr, failType): under
// TinyGo a function that allocates zeroes a GC frame on entry, and the
// readers are on the guest's sync path.
//
//go:noinline
func (r *Reader) fail(msg string) {
	if r.err == nil {
		r.err = errors.New("wire: " + msg)
	}
}

// failType records an unexpected type byte c (already consumed).
//
//go:noinline
func (r *Reader) failType(want string, c byte) {
	r.fail("expected " + want + ", found type byte 0x" + strconv.FormatUint(uint64(c), 16) +
		" at offset " + strconv.Itoa(r.off-1))
}

// SetErr records err, naming the field, unless an error is already recorded.
//
//go:noinline
func (r *Reader) SetErr(field string, err error) {
	if r.err == nil {
		r.err = &FieldError{Field: field, Err: err}
	}
}

// FieldError is a decoding or validation error in one named field.
type FieldError struct {
	Field string // the msgpack field name, e.g. "limit" or "e[3].key"
	Err   error
}

// Error implements error.
func (e *FieldError) Error() string { return "wire: field " + quote(e.Field) + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *FieldError) Unwrap() error { return e.Err }

func (r *Reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.off < n {
		r.err = ErrShort
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *Reader) byte1() byte {
	s := r.take(1)
	if s == nil {
		return 0
	}
	return s[0]
}

func (r *Reader) uint(n int) uint64 {
	s := r.take(n)
	var u uint64
	for _, c := range s {
		u = u<<8 | uint64(c)
	}
	return u
}

// ReadMapHeader reads a map header and returns its number of pairs.
func (r *Reader) ReadMapHeader() int {
	c := r.byte1()
	switch {
	case r.err != nil:
		return 0
	case c&0xf0 == 0x80:
		return int(c & 0x0f)
	case c == 0xde:
		return r.checkLen(r.uint(2))
	case c == 0xdf:
		return r.checkLen(r.uint(4))
	}
	r.failType("a map", c)
	return 0
}

// ReadArrayHeader reads an array header and returns its length.
func (r *Reader) ReadArrayHeader() int {
	c := r.byte1()
	switch {
	case r.err != nil:
		return 0
	case c&0xf0 == 0x90:
		return int(c & 0x0f)
	case c == 0xdc:
		return r.checkLen(r.uint(2))
	case c == 0xdd:
		return r.checkLen(r.uint(4))
	}
	r.failType("an array", c)
	return 0
}

// checkLen rejects container lengths that cannot fit in the remaining input
// (every element takes at least one byte), so a hostile header cannot make a
// caller allocate a huge slice. Every header form is checked: a 16-bit
// one declaring 8,192 entries in a 6-byte body made Batch.UnmarshalMsg
// allocate 448 KiB.
func (r *Reader) checkLen(n uint64) int {
	if n > uint64(len(r.b)-r.off) {
		r.err = ErrShort
		return 0
	}
	return int(n)
}

// fits reports whether n array elements of at least size bytes each fit in
// the remaining input, recording ErrShort when they do not: a decoder
// checks it before allocating n elements (a batch entry, at least 6 bytes,
// is 56 in memory).
func (r *Reader) fits(n, size int) bool {
	if r.err == nil && n > (len(r.b)-r.off)/size {
		r.err = ErrShort
	}
	return r.err == nil
}

// ReadStringBytes reads a str or bin value and returns it without copying.
func (r *Reader) ReadStringBytes() []byte {
	c := r.byte1()
	var n uint64
	switch {
	case r.err != nil:
		return nil
	case c&0xe0 == 0xa0:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n = r.uint(1)
	case c == 0xda || c == 0xc5:
		n = r.uint(2)
	case c == 0xdb || c == 0xc6:
		n = r.uint(4)
	default:
		r.failType("a string", c)
		return nil
	}
	return r.take(int(n))
}

// ReadString reads a str or bin value into a new string.
func (r *Reader) ReadString() string { return string(r.ReadStringBytes()) }

// ReadInt reads any msgpack integer that fits in an int64.
func (r *Reader) ReadInt() int64 {
	c := r.byte1()
	switch {
	case r.err != nil:
		return 0
	case c <= 0x7f:
		return int64(c)
	case c >= 0xe0:
		return int64(int8(c))
	}
	switch c {
	case 0xcc:
		return int64(r.uint(1))
	case 0xcd:
		return int64(r.uint(2))
	case 0xce:
		return int64(r.uint(4))
	case 0xcf:
		u := r.uint(8)
		if u > math.MaxInt64 {
			r.fail("integer " + strconv.FormatUint(u, 10) + " overflows int64")
			return 0
		}
		return int64(u)
	case 0xd0:
		return int64(int8(r.uint(1)))
	case 0xd1:
		return int64(int16(r.uint(2)))
	case 0xd2:
		return int64(int32(r.uint(4)))
	case 0xd3:
		return int64(r.uint(8))
	}
	r.failType("an integer", c)
	return 0
}

// ReadBool reads a msgpack bool.
func (r *Reader) ReadBool() bool {
	c := r.byte1()
	switch {
	case r.err != nil:
		return false
	case c == 0xc3:
		return true
	case c == 0xc2:
		return false
	}
	r.failType("a bool", c)
	return false
}

// Skip skips one value of any type (for fields this version does not know).
func (r *Reader) Skip() { r.skip(0) }

func (r *Reader) skip(depth int) {
	if depth > maxDepth {
		r.fail("values nested deeper than " + strconv.Itoa(maxDepth))
		return
	}
	c := r.byte1()
	if r.err != nil {
		return
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return
	case c&0xf0 == 0x80:
		r.skipN(2*int(c&0x0f), depth)
		return
	case c&0xf0 == 0x90:
		r.skipN(int(c&0x0f), depth)
		return
	case c&0xe0 == 0xa0:
		r.take(int(c & 0x1f))
		return
	}
	switch c {
	case 0xcc, 0xd0:
		r.take(1)
	case 0xcd, 0xd1:
		r.take(2)
	case 0xce, 0xd2, 0xca:
		r.take(4)
	case 0xcf, 0xd3, 0xcb:
		r.take(8)
	case 0xd9, 0xc4:
		r.take(int(r.uint(1)))
	case 0xda, 0xc5:
		r.take(int(r.uint(2)))
	case 0xdb, 0xc6:
		r.take(r.checkLen(r.uint(4)))
	case 0xdc:
		r.skipN(int(r.uint(2)), depth)
	case 0xdd:
		r.skipN(r.checkLen(r.uint(4)), depth)
	case 0xde:
		r.skipN(2*int(r.uint(2)), depth)
	case 0xdf:
		r.skipN(2*r.checkLen(r.uint(4)), depth)
	case 0xd4:
		r.take(2)
	case 0xd5:
		r.take(3)
	case 0xd6:
		r.take(5)
	case 0xd7:
		r.take(9)
	case 0xd8:
		r.take(17)
	case 0xc7:
		r.take(int(r.uint(1)) + 1)
	case 0xc8:
		r.take(int(r.uint(2)) + 1)
	case 0xc9:
		r.take(r.checkLen(r.uint(4)) + 1)
	default:
		r.failType("a msgpack value", c)
	}
}

func (r *Reader) skipN(n, depth int) {
	for i := 0; i < n && r.err == nil; i++ {
		r.skip(depth + 1)
	}
}

// quote wraps s in double quotes (strconv.Quote would pull Unicode tables
// into the guest).
func quote(s string) string { return "\"" + s + "\"" }

// Repeated reports whether f, a field name just read from a map, is one
// of names (at most 64) that this map already gave; seen keeps which
// (zero it per map). A name given twice is an error set on r: decoded
// as they come, the last copy replaced the first, and a batch with its
// entries ("e") twice was answered 200 with half of them lost. Names not
// in names are not tracked (they are skipped anyway).
func (r *Reader) Repeated(seen *uint64, names []string, f []byte) bool {
	for i, n := range names {
		if i < 64 && Equal(n, f) {
			if *seen&(1<<i) != 0 {
				r.SetErr(n, errors.New("given twice"))
				return true
			}
			*seen |= 1 << i
			return false
		}
	}
	return false
}

// Equal reports whether s and b hold the same bytes. Unlike s == string(b)
// it never allocates under TinyGo, where that conversion copies; the guest
// compares keys and names with it.
func Equal(s string, b []byte) bool {
	if len(s) != len(b) {
		return false
	}
	for i := range len(b) {
		if s[i] != b[i] {
			return false
		}
	}
	return true
}
