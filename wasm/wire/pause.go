package wire

import (
	"errors"
	"strconv"
)

// Limiter pauses. An operator's pause of a whole limiter (the
// coordinator's POST /v1/limiters/{name}/pause) is told in every reply
// while it holds (Reply.Paused), not only with the keys a batch names: an
// isolate denies every key of the limiter from the reply on, keys it has
// not synced since included. Told per key, an approximate limiter's edge
// admitted the first request of each such key (it decides without
// waiting). The list is the coordinator's whole answer: a limiter missing
// from it is not paused (a resume reaches the isolate with its next
// reply).

// LimiterPause is one paused limiter of a reply, encoded as the array
// [limiter, left]: left is how long the pause lasts after the reply's At,
// ns (> 0).
type LimiterPause struct {
	//lint:ignore U1000 read by msgpack/v5 (reflection): encode as an array
	_msgpack struct{} `msgpack:",as_array"`
	Limiter  string
	Left     int64
}

// AppendMsg appends p as the array [limiter, left].
func (p *LimiterPause) AppendMsg(dst []byte) []byte {
	dst = AppendArrayHeader(dst, 2)
	dst = AppendString(dst, p.Limiter)
	return AppendInt(dst, p.Left)
}

var errPauseShape = errors.New("want [limiter, left]")

// LimiterPauses calls fn for each paused limiter of the reply (Reply.Paused),
// with its name's bytes (valid during the call), after Next has returned
// false. It returns the first decoding error.
func (rr *ReplyReader) LimiterPauses(fn func(limiter []byte, left int64)) error {
	if rr.r.err != nil || rr.lpStart < 0 {
		return rr.r.err
	}
	r := &rr.r
	r.off = rr.lpStart
	m := r.ReadArrayHeader()
	if m > MaxLimiters {
		r.SetErr("lp", errors.New("more than "+strconv.Itoa(MaxLimiters)+" limiters"))
	}
	for i := 0; i < m && r.err == nil; i++ {
		if r.ReadArrayHeader() != 2 && r.err == nil {
			r.SetErr("lp", errPauseShape)
			break
		}
		lim, left := r.ReadStringBytes(), r.ReadInt()
		if r.err != nil {
			break
		}
		fn(lim, left)
	}
	return r.err
}

// HasPauses reports whether the reply names paused limiters.
func (rr *ReplyReader) HasPauses() bool { return rr.lpStart >= 0 }
