// Package limitmath is the limit math the limiter core (in every isolate)
// and the coordinator share, so that both count alike: the window index,
// the two-window roll and counts of the windowed algorithms, the TAT
// advance of the bucket algorithms, and the saturating integer arithmetic
// under them (a*b/c in 128 bits: a 31-day period in ns times a cost of
// 2^40 does not fit in 64 bits; additions that stop at MaxInt64 instead of
// wrapping). It compiles for the host and the TinyGo guest.
package limitmath

import (
	"math"
	"math/bits"
)

// MulDiv returns a*b/c rounded down, for a, b >= 0 and c > 0 (0 otherwise),
// saturating at MaxInt64.
func MulDiv(a, b, c int64) int64 {
	q, _ := mulDiv(a, b, c)
	return q
}

// MulDivUp is MulDiv rounded up.
func MulDivUp(a, b, c int64) int64 {
	q, exact := mulDiv(a, b, c)
	if !exact && q < math.MaxInt64 {
		q++
	}
	return q
}

func mulDiv(a, b, c int64) (q int64, exact bool) {
	if a <= 0 || b <= 0 || c <= 0 {
		return 0, true
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64, true
	}
	u, r := bits.Div64(hi, lo, uint64(c))
	if u > math.MaxInt64 {
		return math.MaxInt64, true
	}
	return int64(u), r == 0
}

// AddSat returns a+b for b >= 0, saturating at MaxInt64.
func AddSat(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}
