package syncloop

// Amendments (wasm/wire/amend.go): a host holding a request for a lease
// while its isolate's batch is in flight sends the batch amended with the
// request's ask at once, next to the batch, and applies both replies; the
// module takes an amendment's reply while the next batch is in flight
// too, so the host cuts that batch as usual. The edge host, the
// JavaScript package and the simulator share these rules.
//
// A held request waits for the reply of an attempt that asks for it: the
// batch in flight when it was cut after the request was held, or the
// amendment the request's hold sent. A request that no attempt in flight
// asks for (held while the batch's amendments were all on their way, or
// decided SyncRetry again after the reply to its own ask) asks at once
// (NextAsk): in an amendment while a batch is in flight, else in the next
// batch. It does not wait for the replies of attempts that do not carry
// its ask: they cannot admit it, and waiting for them (the first version
// waited for the batch's amendment before cutting the next batch) cost a
// round trip more.

// MaxAmends is how many amendments of one batch an isolate has in flight
// at most. The module takes one amendment's reply after the next batch is
// cut (core.Core.SyncIn; another it refuses as stale), and every
// amendment's reply comes after its batch's: with two, a request that
// needs the next batch when the batch's reply comes waits for the first
// amendment's reply at most before the batch is cut (NextAsk), and a
// second request held within the round trip of the batch is answered a
// round trip sooner. (Measured on the simulator's corpus, 3 seeds: with
// one amendment a request held while it flew waited two round trips
// (dying-isolates wait p99 62.9 ms; with NextAsk and one amendment 54.5
// ms, with two 48.9 ms); with three the next batch waited behind two
// replies more often on busy isolates (zipf-1000 p99 92.3 ms).)
const MaxAmends = 2

// Ask is what a host does for a held request that no attempt in flight
// asks for.
type Ask int

// The answers of NextAsk.
const (
	// AskWait: the request waits for a reply (then it is decided again,
	// and asks again if it must).
	AskWait Ask = iota
	// AskAmend: amend the batch in flight with the request's ask.
	AskAmend
	// AskBatch: cut the next batch now (Scheduler.Want), as the module
	// asks when no batch is in flight.
	AskBatch
)

// NextAsk returns what a host does at once for a held request that no
// attempt in flight asks for, when its isolate's batch is in flight
// (inFlight) or not, and amends amendments of its last batch (the one in
// flight, or the one answered last) are on their way. With the batch in
// flight, it amends it up to MaxAmends; else it cuts the next batch while
// at most one amendment of the last is on its way (the module takes that
// one's reply while the next batch flies), and otherwise waits for the
// first of their replies, so that no amendment's reply is refused.
func NextAsk(inFlight bool, amends int) Ask {
	switch {
	case inFlight && amends < MaxAmends:
		return AskAmend
	case !inFlight && amends <= 1:
		return AskBatch
	}
	return AskWait
}
