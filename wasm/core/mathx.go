package core

import "github.com/edgelimit/edgelimit/wasm/limitmath"

// Short names for the shared saturating arithmetic (package limitmath).

func mulDiv(a, b, c int64) int64     { return limitmath.MulDiv(a, b, c) }
func window(now, period int64) int64 { return limitmath.Window(now, period) }
func addSat(a, b int64) int64        { return limitmath.AddSat(a, b) }

func max64(a, b int64) int64 { return max(a, b) }
func min64(a, b int64) int64 { return min(a, b) }
