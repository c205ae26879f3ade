package sim

import (
	"math"
	"testing"
	"time"
)

// Poisson arrivals with an off period longer than a million arrival gaps
// at the on rate keep coming after it: thinning through such an off
// period ran out of tries, and the source stopped after its first burst
// (10 s on, 30 min off at 1,000/s sent 9,942 requests in 2 h where
// constant arrivals sent 40,001).
func TestPoissonOnOffLongOff(t *testing.T) {
	s := testSim(t)
	for _, kind := range []string{"onoff", "pareto"} {
		counts := map[string]int64{}
		for _, arrival := range []string{"constant", "poisson"} {
			sc := small(t, 4, 1_000_000, 1000, arrival, time.Hour)
			sc.Traffic[0].Pattern = Pattern{Kind: kind, On: Duration(10 * time.Second), Off: Duration(30 * time.Minute), Shape: 50}
			if err := sc.Prepare(); err != nil {
				t.Fatal(err)
			}
			r, err := s.Run(t.Context(), sc, Approximate, time.Second, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			counts[arrival] = r.Requests
		}
		c, p := counts["constant"], counts["poisson"]
		if c < 15_000 || math.Abs(float64(p-c)) > 0.1*float64(c) {
			t.Errorf("%s, 10 s on and 30 min off at 1,000/s for 1 h: %d requests with Poisson arrivals, %d constant; want both about 20,000", kind, p, c)
		}
	}
}
