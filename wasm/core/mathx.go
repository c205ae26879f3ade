package core

import "github.com/edgelimit/edgelimit/wasm/satmath"

// Short names for the shared saturating arithmetic (package satmath).

func mulDiv(a, b, c int64) int64 { return satmath.MulDiv(a, b, c) }
func addSat(a, b int64) int64    { return satmath.AddSat(a, b) }

func max64(a, b int64) int64 { return max(a, b) }
func min64(a, b int64) int64 { return min(a, b) }
