package wire

import (
	"errors"
	"strconv"
)

// Reset notices: a key reset at the coordinator (the admin API's DELETE
// /v1/limiters/{name}/keys/{key}) must reach every isolate, also those
// that no longer sync the key because they deny it from what they cached
// (a dry spell, a full window, an upstream pause). The coordinator numbers
// its resets with a generation (ns of its clock, increasing); each batch
// says the generation of the last reply its isolate applied
// (Batch.ResetGen) and the reply lists the keys reset since
// (Reply.Resets), or says it cannot (Reply.ResetAll). See SCHEMA.md.

// ResetKey names one key reset at the coordinator, encoded as the array
// [limiter, key].
type ResetKey struct {
	//lint:ignore U1000 read by msgpack/v5 (reflection): encode as an array
	_msgpack struct{} `msgpack:",as_array"`
	Limiter  string
	Key      string
}

// appendResets appends the reply's reset fields (rg, rs, ra) that are set.
func (rp *Reply) appendResets(dst []byte) []byte {
	if rp.ResetGen != 0 { // a negative one too (which a module refuses): what is given is written
		dst = AppendString(dst, "rg")
		dst = AppendInt(dst, rp.ResetGen)
	}
	if len(rp.Resets) > 0 {
		dst = AppendString(dst, "rs")
		dst = AppendArrayHeader(dst, len(rp.Resets))
		for i := range rp.Resets {
			dst = AppendArrayHeader(dst, 2)
			dst = AppendString(dst, rp.Resets[i].Limiter)
			dst = AppendString(dst, rp.Resets[i].Key)
		}
	}
	if rp.ResetAll {
		dst = AppendString(dst, "ra")
		dst = AppendBool(dst, true)
	}
	return dst
}

var errResetShape = errors.New("want [limiter, key]")

// HasResets reports whether the reply lists reset keys.
func (rr *ReplyReader) HasResets() bool { return rr.rsStart >= 0 }

// Resets calls fn for each key the reply lists as reset (Reply.Resets),
// with its limiter and key bytes (valid during the call). It returns the
// first decoding error; fn is not called for an entry that fails.
func (rr *ReplyReader) Resets(fn func(limiter, key []byte)) error {
	if rr.r.err != nil || rr.rsStart < 0 {
		return rr.r.err
	}
	r := &rr.r
	r.off = rr.rsStart
	m := r.ReadArrayHeader()
	if m > MaxBatchEntries {
		r.SetErr("rs", errors.New("more than "+strconv.Itoa(MaxBatchEntries)+" entries"))
	}
	for i := 0; i < m && r.err == nil; i++ {
		if r.ReadArrayHeader() != 2 && r.err == nil {
			r.SetErr("rs", errResetShape)
			break
		}
		lim, key := r.ReadStringBytes(), r.ReadStringBytes()
		if r.err != nil {
			break
		}
		if len(key) == 0 || len(key) > MaxKeyLen {
			r.SetErr("rs.key", errKeyLen)
			break
		}
		fn(lim, key)
	}
	return r.err
}
