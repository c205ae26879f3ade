package coordinator

import "github.com/edgelimit/edgelimit/wasm/satmath"

// Short names for the saturating arithmetic shared with the limiter core
// (package satmath).

func mulDiv(a, b, c int64) int64   { return satmath.MulDiv(a, b, c) }
func mulDivUp(a, b, c int64) int64 { return satmath.MulDivUp(a, b, c) }
func addSat(a, b int64) int64      { return satmath.AddSat(a, b) }
