package abi

import (
	"encoding/binary"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// What the guest writes (PutResult into int64 slots, laid out little-endian
// in wasm memory) is what the host reads (ReadResult), and the status word
// carries the same bits.
func TestResultRoundTrip(t *testing.T) {
	for _, r := range []wire.Result{
		{},
		{Allowed: true, Limit: 6, Remaining: 5, Reset: 1_763_700_001_000_000_000, Limiter: 3},
		{SyncWanted: true, SyncRetry: true, RetryAfter: -1, Limit: wire.MaxLimit, Remaining: 0, Limiter: wire.MaxLimiters - 1},
		{Allowed: true, SyncWanted: true, RetryAfter: 0, Reset: -5},
	} {
		var slots [ResultSlots]int64
		st := PutResult(&slots, &r)
		b := make([]byte, 0, ResultBytes)
		for _, s := range slots {
			b = binary.LittleEndian.AppendUint64(b, uint64(s))
		}
		if got := ReadResult(b); got != r {
			t.Errorf("round trip: got %+v, want %+v", got, r)
		}
		if (st&StatusAllowed != 0) != r.Allowed || (st&StatusSyncWanted != 0) != r.SyncWanted || (st&StatusSyncRetry != 0) != r.SyncRetry {
			t.Errorf("%+v: status word %b", r, st)
		}
	}
}
