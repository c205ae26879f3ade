package wire

import (
	"math"
	"strings"
	"testing"
)

// TestMaxReplyBytes: a reply with MaxBatchEntries views, upstream views
// and reset keys, every name and key at its longest and every number at
// its longest encoding, is exactly MaxReplyBytes long.
func TestMaxReplyBytes(t *testing.T) {
	lim, key := strings.Repeat("l", MaxNameLen), strings.Repeat("k", MaxKeyLen)
	const n = math.MinInt64 // 9 bytes, as every int64 past 32 bits
	rp := Reply{Version: n, Seq: n, At: n, ResetGen: n, ResetAll: true}
	for i := 0; i < MaxBatchEntries; i++ {
		rp.Entries = append(rp.Entries, View{Limiter: lim, Key: key, Window: n, Count: n, Prev: n, TAT: n, Lease: n,
			Isolates: n, Stand: n, Exhausted: true, Life: n, Limit: n, Held: n, StandTo: n, Pace: n})
		rp.Upstream = append(rp.Upstream, UpView{Limiter: lim, Key: key, Pause: n, Circuit: n, Open: n, Probe: true, Limit: n, Life: n})
		rp.Resets = append(rp.Resets, ResetKey{Limiter: lim, Key: key})
	}
	for i := 0; i < MaxLimiters; i++ {
		rp.Paused = append(rp.Paused, LimiterPause{Limiter: lim, Left: n})
	}
	b := rp.AppendMsg(nil)
	if len(b) != MaxReplyBytes {
		t.Fatalf("the largest reply is %d bytes, MaxReplyBytes says %d", len(b), MaxReplyBytes)
	}
}
