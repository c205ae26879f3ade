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

// boundView caps v's counts (windowed) or TAT (buckets) for a key of lim
// whose limit in force is limit, at now (ns): see above.
func boundView(v *wire.View, lim *wire.LimiterConfig, limit, now int64) {
	limit = max(limit, 1)
	if lim.IsBucket() {
		refill := mulDivUp(lim.EffectiveBurst(limit), lim.Period, limit)
		v.TAT = min(v.TAT, addSat(now, mulDiv(refill, viewRefills, 1)))
		return
	}
	top := mulDiv(limit, viewOvercommit, 1)
	v.Count, v.Prev = min(v.Count, top), min(v.Prev, top)
}
