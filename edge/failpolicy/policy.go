// Package failpolicy decides what an isolate cut off from the coordinator
// does with a request: the fail policies shared by the edge host
// (edge/host) and the simulator (sim). It is pure: no I/O, no clock (times
// are passed in, in ns), no goroutines; a Share is not safe for
// concurrent use (one per isolate, used under the isolate's lock).
//
// A policy applies only while the isolate's view is stale: its syncs fail
// and its last successful one is older than the host's stale bound
// (syncloop.Scheduler.Stale; an idle isolate is not stale). Then, per
// limiter:
//
//   - Open: the policy lets every request through to the module, which
//     decides from its last view as if it were fresh; on a leased limiter
//     the policy admits in the module's place what it denies for want of
//     a lease (see Leased).
//   - Closed: every request is denied.
//   - LocalShare: a request passes only within the isolate's share of the
//     key's limit, max(limit/isolates, 1) per window of the limiter's
//     period, and is then decided by the module as well (a lease miss
//     admitted, see Leased).
package failpolicy

import (
	"fmt"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Policy is a fail policy. The zero value is Open.
type Policy uint8

// The fail policies.
const (
	Open       Policy = iota // decide from the last view
	Closed                   // deny every request
	LocalShare               // admit up to limit/isolates per window per key, then ask the module
)

// Parse returns the policy named name: "open", "closed" or "local-share"
// (wire.FailOpen, wire.FailClosed, wire.FailLocalShare).
func Parse(name string) (Policy, error) {
	switch name {
	case wire.FailOpen:
		return Open, nil
	case wire.FailClosed:
		return Closed, nil
	case wire.FailLocalShare:
		return LocalShare, nil
	}
	return Open, fmt.Errorf("failpolicy: unknown fail policy %q (want open, closed or local-share)", name)
}

// String returns the policy's name as Parse accepts it.
func (p Policy) String() string {
	switch p {
	case Open:
		return wire.FailOpen
	case Closed:
		return wire.FailClosed
	case LocalShare:
		return wire.FailLocalShare
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// For returns the policy of limiter l: its FailPolicy when set (a
// validated wire.Config holds only valid names), def otherwise.
func For(l *wire.LimiterConfig, def Policy) Policy {
	if p, err := Parse(l.FailPolicy); err == nil {
		return p
	}
	return def
}

// Verdict is what the policy makes of a request.
type Verdict uint8

// The verdicts of Apply.
const (
	Pass Verdict = iota // the policy does not deny: decide as usual (ask the module)
	Deny                // deny without asking the module
)

// Apply returns the verdict of policy p on a request of cost on key at now
// (ns). stale reports whether the isolate's view is stale; when it is not,
// or p is Open, the verdict is Pass. Closed denies. LocalShare takes cost
// from sh (see Share.Take) and denies when it does not fit; a Pass then
// still needs the module's own decision, and the cost taken is not given
// back if the module denies (the simulator's semantics).
func Apply[K comparable](p Policy, stale bool, sh *Share[K], key K, cost int64, q Quota, now int64) Verdict {
	if !stale {
		return Pass
	}
	switch p {
	case Closed:
		return Deny
	case LocalShare:
		if !sh.Take(key, cost, q, now) {
			return Deny
		}
	}
	return Pass
}
