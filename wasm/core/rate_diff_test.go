package core_test

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestTokenBucketMatchesXTimeRate runs the core's token bucket and
// golang.org/x/time/rate side by side over seeded random (time, cost)
// sequences and requires the same decision at every step. Steps where
// x/time/rate's token count is within 1e-6 of the cost are skipped for both
// limiters (except when the bucket is exactly full, or the cost is 0): there
// the float arithmetic of x/time/rate and the integer nanoseconds of the core
// may round differently.
func TestTokenBucketMatchesXTimeRate(t *testing.T) {
	type params struct {
		limit, burst int64
		period       time.Duration
	}
	cases := []params{
		{10, 10, time.Second},
		{10, 3, time.Second},
		{100, 20, time.Minute},
		{3, 5, 10 * time.Second}, // period/limit not a whole number of ns
		{7, 7, time.Hour},
		{1000, 50, time.Millisecond},
		{1, 1, 24 * time.Hour},
		{60, 1, time.Minute},
		{5, 100, time.Second}, // burst above the limit
	}
	steps := 4000
	if testing.Short() {
		steps = 1000
	}
	for ci, p := range cases {
		for seed := int64(1); seed <= 3; seed++ {
			name := fmt.Sprintf("limit%d_burst%d_per%v_seed%d", p.limit, p.burst, p.period, seed)
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed*100 + int64(ci)))
				c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.TokenBucket,
					Limit: p.limit, Period: int64(p.period), Burst: p.burst}))
				lim := rate.NewLimiter(rate.Limit(float64(p.limit)/p.period.Seconds()), int(p.burst))
				base := time.Unix(1_700_000_000, 0)
				// Time steps around the time one unit takes to refill.
				unit := int64(p.period) / p.limit
				now := int64(0)
				compared, allowed, skipped := 0, 0, 0
				for i := 0; i < steps; i++ {
					switch rng.Intn(4) {
					case 0: // same instant
					case 1:
						now += rng.Int63n(unit + 1)
					case 2:
						now += rng.Int63n(4*unit + 1)
					case 3:
						now += rng.Int63n(int64(p.burst)*unit + 1)
					}
					cost := rng.Int63n(p.burst + 2) // sometimes above the burst
					if rng.Intn(8) == 0 {
						cost = 0
					}
					at := base.Add(time.Duration(now))
					// A full bucket (tokens exactly the burst) and a peek (cost
					// 0, always admitted by both) are exact, not ambiguous.
					tokens := lim.TokensAt(at)
					if math.Abs(tokens-float64(cost)) < 1e-6 && tokens != float64(p.burst) && cost != 0 {
						skipped++
						continue
					}
					compared++
					want := lim.AllowN(at, int(cost))
					var r core.Result
					if err := c.Decide(0, []byte("k"), cost, now, &r); err != nil {
						t.Fatal(err)
					}
					if r.Allowed != want {
						t.Fatalf("step %d (t=%v, cost %d): core allowed=%v, x/time/rate allowed=%v (rate tokens before: %.9f; core %+v)",
							i, time.Duration(now), cost, r.Allowed, want, lim.TokensAt(at), r)
					}
					if want {
						allowed++
					}
				}
				if compared < steps*9/10 {
					t.Errorf("only %d of %d steps compared (%d skipped)", compared, steps, skipped)
				}
				if allowed == 0 || allowed == compared {
					t.Errorf("%d of %d steps allowed: the sequence does not exercise both outcomes", allowed, compared)
				}
			})
		}
	}
}
