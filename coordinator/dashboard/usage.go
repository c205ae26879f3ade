package dashboard

import (
	"math"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Usage is what a key of limiter cfg uses at now (ns), from its last
// global view (window, count, prev: windowed algorithms; tat: buckets), as
// the dashboard and the coordinator's near-limit gauges count it. Count is
// the current window's count (fixed window), the sliding-window estimate
// (count + prev weighted by what is left of the window), or the part of
// the bucket in use (token bucket, GCRA); Limit is the key's limit after
// per-key overrides, or the bucket's capacity; Reset is how long until the
// count next drops (the window's end, or when the bucket is full again),
// ns.
type Usage struct {
	Count, Limit, Reset int64
}

// Used returns Count / Limit (0 for a limit of 0).
func (u Usage) Used() float64 {
	if u.Limit <= 0 {
		return 0
	}
	return float64(u.Count) / float64(u.Limit)
}

// UsageOf computes the Usage of key under cfg at now from its last view
// (window, count, prev, tat as in wire.View).
func UsageOf(cfg *wire.LimiterConfig, key string, window, count, prev, tat, now int64) Usage {
	u := Usage{Limit: cfg.LimitFor(key)}
	p := cfg.Period
	if cfg.IsBucket() {
		limit := u.Limit
		u.Limit = cfg.EffectiveBurst(limit)
		if ahead := tat - now; ahead > 0 && limit > 0 {
			t := max(p/limit, 1) // ns per unit of cost
			u.Count = min((ahead+t-1)/t, u.Limit)
			u.Reset = ahead
		}
		return u
	}
	w := now / p
	var cur, old int64
	switch window {
	case w:
		cur, old = count, prev
	case w - 1:
		old = count
	}
	u.Count = cur
	if cfg.Algorithm == wire.SlidingWindow {
		left := float64(p-now%p) / float64(p)
		u.Count = cur + int64(math.Ceil(float64(old)*left))
	}
	u.Reset = (w+1)*p - now
	return u
}
