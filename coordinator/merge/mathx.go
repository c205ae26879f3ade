package merge

import "github.com/edgelimit/edgelimit/wasm/limitmath"

// Short names for the saturating arithmetic shared with the limiter core
// (package limitmath).

func mulDiv(a, b, c int64) int64   { return limitmath.MulDiv(a, b, c) }
func mulDivUp(a, b, c int64) int64 { return limitmath.MulDivUp(a, b, c) }
func addSat(a, b int64) int64      { return limitmath.AddSat(a, b) }

// fnv1a is the 64-bit FNV-1a hash of b.
func fnv1a[T string | []byte](b T) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(b); i++ {
		h ^= uint64(b[i])
		h *= 1099511628211
	}
	return h
}
