package merge

import "testing"

// sparseStandUnits: the fewest requests' worth that leave at most 5% of a
// sparse isolate's Poisson requests in a window uncovered, one where the
// key's requests do not all cost a unit, at most maxSparseStand.
func TestSparseStandUnits(t *testing.T) {
	for _, c := range []struct {
		lambda float64 // cost per window
		unit   int64
		fit    float64
		want   int64
	}{
		{0.1, 1, 1, 1},  // 4.8% of its requests past one
		{0.31, 1, 1, 2}, // 14% past one, 1.2% past two
		{1.56, 1, 1, 4}, // 1.6 requests a window: 49%, 20%, 6.6%, 1.9% past 1-4
		{3.12, 2, 1, 4}, // the same in requests of cost 2
		{1.56, 1, 0.5, 1},
		{0, 1, 1, 1},
		{40, 1, 1, maxSparseStand},
	} {
		if got := sparseStandUnits(c.lambda, c.unit, c.fit); got != c.want {
			t.Errorf("sparseStandUnits(%v, %d, %v) = %d, want %d", c.lambda, c.unit, c.fit, got, c.want)
		}
	}
}
