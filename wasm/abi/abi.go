// Package abi is the one definition of the module's scalar ABI: the
// buffers the guest exports (sizes), the layout of the result slots and of
// a multi-limiter record, and the bits of the status word and the flags.
// The guest (wasm/guest) writes with it and the Go host (edge/isolate)
// reads with it; the JavaScript package (edge/js/src/module.js) mirrors it
// and wasm/wire/SCHEMA.md documents it. It compiles for the host and for
// the TinyGo guest (no dependencies but wire).
package abi

import "github.com/edgelimit/edgelimit/wasm/wire"

// KeyBufSize is the size of the key buffer (el_key_buf), bytes: one key for
// el_decide and el_reset, or the records of el_decide_multi.
const KeyBufSize = 4096

// MultiHeader is the size of one el_decide_multi record's header:
// [u32 limiter index][u32 key length][i64 cost], little-endian, followed by
// the key bytes.
const MultiHeader = 16

// The result buffer (el_result_buf) holds ResultSlots little-endian int64
// slots, in this order.
const (
	SlotAllowed    = iota // 1 allowed, 0 denied
	SlotLimit             // the binding limiter's limit for the key
	SlotRemaining         // cost still admissible now
	SlotReset             // ns time the window ends or the bucket is full
	SlotRetryAfter        // ns until the request could pass; 0 allowed, -1 never
	SlotFlags             // FlagSyncWanted | FlagSyncRetry
	SlotLimiter           // index of the binding limiter
	ResultSlots           // number of slots
)

// ResultBytes is the size of the result buffer, bytes.
const ResultBytes = ResultSlots * 8

// Bits of SlotFlags.
const (
	FlagSyncWanted = 1 << 0
	FlagSyncRetry  = 1 << 1
)

// Bits of the status word el_decide and el_decide_multi return when it is
// >= 0 (< 0 is an error code, see core.Code).
const (
	StatusAllowed    = 1 << 0
	StatusSyncWanted = 1 << 1
	StatusSyncRetry  = 1 << 2
)

// PutResult writes r into the result slots and returns the status word.
func PutResult(slots *[ResultSlots]int64, r *wire.Result) int32 {
	var flags, status int64
	if r.SyncWanted {
		flags |= FlagSyncWanted
		status |= StatusSyncWanted
	}
	if r.SyncRetry {
		flags |= FlagSyncRetry
		status |= StatusSyncRetry
	}
	slots[SlotAllowed] = 0
	if r.Allowed {
		slots[SlotAllowed] = 1
		status |= StatusAllowed
	}
	slots[SlotLimit] = r.Limit
	slots[SlotRemaining] = r.Remaining
	slots[SlotReset] = r.Reset
	slots[SlotRetryAfter] = r.RetryAfter
	slots[SlotFlags] = flags
	slots[SlotLimiter] = int64(r.Limiter)
	return int32(status)
}

// ReadResult reads the result buffer's bytes (at least ResultBytes) into a
// result.
func ReadResult(b []byte) wire.Result {
	slot := func(i int) int64 {
		s := b[i*8 : i*8+8 : i*8+8]
		return int64(uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56)
	}
	flags := slot(SlotFlags)
	return wire.Result{
		Allowed:    slot(SlotAllowed) == 1,
		Limit:      slot(SlotLimit),
		Remaining:  slot(SlotRemaining),
		Reset:      slot(SlotReset),
		RetryAfter: slot(SlotRetryAfter),
		SyncWanted: flags&FlagSyncWanted != 0,
		SyncRetry:  flags&FlagSyncRetry != 0,
		Limiter:    int(slot(SlotLimiter)),
	}
}
