package dashboard

// MaxTotal is where a running total of cost (AddTotal) starts again:
// 2^53, below which a float64 (what Prometheus and JSON readers hold)
// counts every unit.
const MaxTotal = 1 << 53

// AddTotal returns total plus d (cost units, >= 0) for a running total
// that a Prometheus counter or the dashboard shows (admitted and denied
// per limiter): at most MaxTotal, past it it starts again from d, which Prometheus
// reads as a counter reset, so rate() goes on counting. Saturated instead,
// one batch of 8,192 denials of 2^50 from a client with an edge token held
// a limiter's denied total at 2^63-1 for the life of the process, and
// rate() read 0 whatever was denied after.
func AddTotal(total, d int64) int64 {
	if d < 0 || d >= MaxTotal {
		return min(max(d, 0), MaxTotal-1)
	}
	if total > MaxTotal-d {
		return d
	}
	return total + d
}
