package syncloop

import "time"

// Amendments (wasm/wire/amend.go): a host holding a request for a lease
// while its isolate's batch is in flight sends the batch amended with the
// request's ask at once, next to the batch, and applies both replies. The
// edge host and the simulator share these rules.

// MaxAmends is how many amendments an isolate has in flight at most: a
// request held while one is on its way waits for a reply. (Measured on the
// simulator's corpus, 2 and 4 gave no better wait p99 for up to 1.5x the
// syncs.)
const MaxAmends = 1

// AmendHoldMin and AmendHoldMax bound AmendHold.
const (
	AmendHoldMin = 10 * time.Millisecond
	AmendHoldMax = time.Second
)

// AmendHold returns how long (ns) an amendment in flight holds the next
// batch back, given the isolate's last round trip rtt (ns): a batch cut
// before the amendment's reply comes makes the module refuse that reply.
// Twice rtt, within AmendHoldMin and AmendHoldMax.
func AmendHold(rtt int64) int64 {
	return min(max(2*rtt, int64(AmendHoldMin)), int64(AmendHoldMax))
}
