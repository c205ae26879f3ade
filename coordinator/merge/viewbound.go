package merge

import "github.com/edgelimit/edgelimit/wasm/wire"

// View bounds. The module refuses a whole reply holding a value no honest
// coordinator could send it (wasm/core/check.go): a count or prev above
// 2^20 times the largest limit its configuration allows the key, a TAT
// further ahead than 60 s plus 64 times that limit's periods. The counts
// and TATs kept here are sums of what the isolates report, and one client
// can report any cost up to wire.MaxLimit per entry (a fixed window of
// 100/h that took a cost of 2^40 from one batch): sent as they are, every
// other isolate that syncs the key would refuse every reply naming it,
// so its batches, and the cost it admits on every other key, would never
// be acknowledged. A view therefore says at most viewOvercommit times the
// key's limit in force for a count or prev, and a TAT at most viewRefills
// times the burst's refill time ahead of now: far past anything that
// decides otherwise (the key is full either way), and well inside what the
// module takes. What is stored is not changed: the view is bounded, not
// the key.

const (
	// viewOvercommit bounds a view's count and prev, as a multiple of
	// the key's limit: 2^16 isolates each admitting the limit.
	viewOvercommit = 1 << 16
	// viewRefills bounds how far ahead of now a view's TAT is, in refill
	// times of the key's burst.
	viewRefills = 16
)

// An approximate bucket's stored TAT is held within the same viewRefills
// refill times of now (applyDelta): it owes at most viewRefills - 1 bursts
// past empty. Isolates deciding from the same view, each admitting what
// it sees, overrun a bucket by up to a burst each (more through an outage
// failing open), and the bucket pays that back by staying empty; a debt of
// up to viewRefills - 1 bursts (15) is paid back in full. Past it, no
// decision changes until the debt is paid down to the bound, since every
// view says at most that: holding the TAT there only ends the tail, so
// that one batch with a cost of 2^40 (about 3,500 years of a 10/s
// bucket's refills; the int64 TAT saturates first) leaves the key denying
// for viewRefills refill times (32 s for a burst of 20 at 10/s), not for
// good. Strict buckets owe nothing past empty (apply.go).

// refillsAhead is how far ahead of now a bucket's TAT may be, in ns:
// viewRefills times the refill time of the burst of lim at limit.
func refillsAhead(lim *wire.LimiterConfig, limit int64) int64 {
	return mulDiv(mulDivUp(lim.EffectiveBurst(max(limit, 1)), lim.Period, max(limit, 1)), viewRefills, 1)
}

// boundView caps v's counts (windowed) or TAT (buckets) for a key of lim
// whose limit in force is limit, at now (ns): see above.
func boundView(v *wire.View, lim *wire.LimiterConfig, limit, now int64) {
	limit = max(limit, 1)
	if lim.IsBucket() {
		v.TAT = min(v.TAT, addSat(now, refillsAhead(lim, limit)))
		return
	}
	top := mulDiv(limit, viewOvercommit, 1)
	v.Count, v.Prev = min(v.Count, top), min(v.Prev, top)
}
