//go:build wasip1

package main

import (
	"errors"
	"unsafe"

	"github.com/edgelimit/edgelimit/wasm/abi"
	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Layouts of the scalar ABI (all integers little-endian; the sizes, slots
// and bits are defined once, in package abi):
//
//	key buffer (el_key_buf, abi.KeyBufSize bytes):
//	  el_decide / el_reset / el_admit: the key bytes at offset 0.
//	  el_decide_multi: n records, each a 16-byte header
//	  [u32 limiter index][u32 key length][i64 cost] followed by the key bytes.
//	result buffer (el_result_buf, abi.ResultSlots x i64):
//	  [allowed 0/1][limit][remaining][reset ns][retry-after ns][flags][binding limiter index]
//	  flags: bit 0 sync wanted, bit 1 sync retry (core.Result.SyncRetry)
//	status word returned by el_decide*: >= 0 is bit 0 allowed, bit 1 sync
//	wanted, bit 2 sync retry; < 0 is an error code (core.Code).
//	io buffer (el_io_buf): msgpack in (configure, sync_in) and out
//	(sync_out, stats), and the raw bytes of a new isolate id followed by
//	its secret in (el_reincarnate); el_io_buf(n) makes room for n bytes and
//	returns its address, and outputs are read from el_io_ptr() for the
//	returned length.
//	el_reincarnate(n, m) -> status: 0, or < 0 (core.Code); see core.Core.Reincarnate.
//	el_amend(now) -> length: the outstanding batch amended with asks, in the
//	io buffer (0: none to send); see core.Core.Amend.
//	el_withdraw() -> status: 0, or < 0 (core.Code); see core.Core.Withdraw.
//	el_recall(now, amendsRefused) -> 1: the outstanding batch was taken back, 0: none to take
//	back, < 0 (core.Code); see core.Core.Recall.
//	el_clock_offset(off) -> status: 0, or < 0 (core.Code); see core.Core.ClockOffset.
//	el_observe(n) -> length: reads a msgpack wire.Observation of n bytes from
//	the io buffer and writes the msgpack wire.Observed there; < 0 is an error
//	code. See core.Core.Observe.
var (
	keyBuf    [abi.KeyBufSize]byte
	resultBuf [abi.ResultSlots]int64
	ioBuf     []byte
	result    core.Result
	checks    [wire.MaxChecks]core.Check
)

//export el_key_buf
func elKeyBuf() int32 { return int32(uintptr(unsafe.Pointer(&keyBuf[0]))) }

//export el_result_buf
func elResultBuf() int32 { return int32(uintptr(unsafe.Pointer(&resultBuf[0]))) }

//export el_io_buf
func elIOBuf(n int32) int32 {
	if n < 0 || n > 16<<20 {
		return 0
	}
	if cap(ioBuf) < int(n) || cap(ioBuf) == 0 {
		ioBuf = make([]byte, n, n+64)
	}
	ioBuf = ioBuf[:n]
	return elIOPtr()
}

//export el_io_ptr
func elIOPtr() int32 {
	if cap(ioBuf) == 0 {
		ioBuf = make([]byte, 0, 1024)
	}
	return int32(uintptr(unsafe.Pointer(&ioBuf[:1][0])))
}

func status(r *core.Result) int32 { return abi.PutResult(&resultBuf, r) }

//export el_decide
func elDecide(limiter, keyLen int32, cost, now int64) int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	if keyLen < 0 || keyLen > wire.MaxKeyLen {
		return core.Code(core.ErrKeyTooLong)
	}
	if err := lim.Decide(int(limiter), keyBuf[:keyLen], cost, now, &result); err != nil {
		return core.Code(err)
	}
	return status(&result)
}

//export el_decide_multi
func elDecideMulti(n int32, now int64) int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	if n < 1 || n > wire.MaxChecks {
		return core.Code(core.ErrTooManyChecks)
	}
	off := 0
	for i := 0; i < int(n); i++ {
		if off+abi.MultiHeader > abi.KeyBufSize {
			return core.Code(core.ErrBadInput)
		}
		li := le32(keyBuf[off:])
		kl := le32(keyBuf[off+4:])
		cost := int64(le32(keyBuf[off+8:])) | int64(le32(keyBuf[off+12:]))<<32
		off += abi.MultiHeader
		if kl > wire.MaxKeyLen {
			return core.Code(core.ErrKeyTooLong)
		}
		if off+int(kl) > abi.KeyBufSize {
			return core.Code(core.ErrBadInput)
		}
		checks[i] = core.Check{Limiter: int(li), Key: keyBuf[off : off+int(kl)], Cost: cost}
		off += int(kl)
	}
	if err := lim.DecideMulti(checks[:n], now, &result); err != nil {
		return core.Code(err)
	}
	return status(&result)
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// el_release starts a graceful stop (core.Core.Release): the next batches
// report every key holding a lease, the last one giving the leases back.
//
//export el_release
func elRelease() int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	lim.Release()
	return 0
}

// el_clock_offset tells the module the offset (ns) of the clock the host
// passes times on from now on, against its own (core.Core.ClockOffset): a
// lower one than the last is a step back, and lease times move back with
// it. It returns 0, or an error code when not configured.
//
//export el_clock_offset
func elClockOffset(off int64) int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	lim.ClockOffset(off)
	return 0
}

// el_withdraw takes back the asks of the last decision, which answered
// SyncRetry, when the host denies that request for good instead of holding
// it (core.Core.Withdraw). It returns 0, or an error code when not
// configured.
//
//export el_withdraw
func elWithdraw() int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	lim.Withdraw()
	return 0
}

// el_recall takes the outstanding batch back after the coordinator refused
// it for its times (HTTP 400 clock_skew) and applied nothing of it
// (core.Core.Recall), at now (ns, the host's time on the clock the
// refusal's reading put it on): the next el_sync_out cuts it again.
// amendsRefused is 1 when the host knows that every amendment of the batch
// (el_amend) was refused for its times too, else 0. It returns 1 when it
// took a batch back, 0 when there was none to take back (none outstanding,
// or an amended one and amendsRefused 0), or an error code when not
// configured.
//
//export el_recall
func elRecall(now int64, amendsRefused int32) int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	if lim.Recall(now, amendsRefused == 1) != nil {
		return 0
	}
	return 1
}

// el_admit records cost admitted by the host without a decision (a fail
// policy admitting in the module's place; core.Core.Admit): the key bytes
// at offset 0 of the key buffer. It returns 0 or an error code.
//
//export el_admit
func elAdmit(limiter, keyLen int32, cost, now int64) int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	if keyLen < 0 || keyLen > wire.MaxKeyLen {
		return core.Code(core.ErrKeyTooLong)
	}
	return core.Code(lim.Admit(int(limiter), keyBuf[:keyLen], cost, now))
}

//export el_reset
func elReset(limiter, keyLen int32) int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	if keyLen < 0 || keyLen > wire.MaxKeyLen {
		return core.Code(core.ErrKeyTooLong)
	}
	return core.Code(lim.Reset(int(limiter), keyBuf[:keyLen]))
}

// el_configure reads a msgpack wire.Config of n bytes from the io buffer.
//
//export el_configure
func elConfigure(n int32) int32 {
	if n < 0 || int(n) > len(ioBuf) {
		return core.Code(core.ErrBadInput)
	}
	return core.Code(configure(ioBuf[:n]))
}

// el_sync_out writes the batch to send into the io buffer and returns its
// length (0: nothing to sync), or a negative error code.
//
//export el_sync_out
func elSyncOut(now int64) int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	out, err := lim.SyncOut(now, ioBuf[:0])
	if err != nil {
		return core.Code(err)
	}
	ioBuf = out
	return int32(len(out))
}

// el_amend writes the outstanding batch amended with the asks of the
// requests held since it was cut into the io buffer and returns its length
// (0: no amendment to send), or a negative error code. See
// core.Core.Amend.
//
//export el_amend
func elAmend(now int64) int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	out, err := lim.Amend(now, ioBuf[:0])
	if err != nil {
		return core.Code(err)
	}
	ioBuf = out
	return int32(len(out))
}

// el_sync_in applies the coordinator's reply of n bytes from the io buffer.
//
//export el_sync_in
func elSyncIn(n int32, now int64) int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	if n < 0 || int(n) > len(ioBuf) {
		return core.Code(core.ErrBadInput)
	}
	return core.Code(lim.SyncIn(ioBuf[:n], now))
}

// el_reincarnate starts a new incarnation of the isolate under the id of n
// bytes in the io buffer, with the secret of the m bytes that follow it
// (wire.Config.IsolateSecret; m = 0: none). Sequence numbers restart at 1;
// the outstanding batch becomes batch 1 of the new id. The host calls it
// when the coordinator refuses the batch's sequence number or identity
// (HTTP 409). Returns 0 or a negative error code.
//
//export el_reincarnate
func elReincarnate(n, m int32) int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	if n < 0 || m < 0 || int64(n)+int64(m) > int64(len(ioBuf)) {
		return core.Code(core.ErrBadInput)
	}
	return core.Code(lim.Reincarnate(string(ioBuf[:n]), string(ioBuf[n:n+m])))
}

// el_observe applies what an upstream answered (wire.Observation of n bytes
// in the io buffer) and writes the key's upstream state (wire.Observed) into
// the io buffer, returning its length or a negative error code.
//
//export el_observe
func elObserve(n int32) int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	if n < 0 || int(n) > len(ioBuf) {
		return core.Code(core.ErrBadInput)
	}
	out, err := observe(ioBuf[:n])
	if err != nil {
		return core.Code(err)
	}
	ioBuf = out.AppendMsg(ioBuf[:0])
	return int32(len(ioBuf))
}

func observe(b []byte) (wire.Observed, error) {
	var o wire.Observation
	var r wire.Observed
	if err := o.UnmarshalMsg(b); err != nil {
		return r, errors.Join(core.ErrBadInput, err)
	}
	li := lim.LimiterIndex(o.Limiter)
	if li < 0 {
		return r, errors.Join(core.ErrUnknownLimiter, errors.New("core: no limiter named \""+o.Limiter+"\""))
	}
	err := lim.Observe(li, []byte(o.Key), o.Status, o.Headers, o.Local, o.Now, &r)
	return r, err
}

// el_stats writes the msgpack stats into the io buffer and returns the length.
//
//export el_stats
func elStats() int32 {
	if lim == nil {
		return core.Code(core.ErrNotConfigured)
	}
	s := lim.Stats()
	ioBuf = s.AppendMsg(ioBuf[:0])
	return int32(len(ioBuf))
}

func configure(b []byte) error {
	var cfg wire.Config
	if err := cfg.UnmarshalMsg(b); err != nil {
		return err
	}
	c, err := core.New(cfg)
	if err != nil {
		return err
	}
	lim = c
	return nil
}
