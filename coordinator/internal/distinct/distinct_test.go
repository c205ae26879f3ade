package distinct

import (
	"hash/maphash"
	"math"
	"strconv"
	"testing"
)

// The estimate's standard error with 4,096 registers is 1.04/64, 1.6%.
// Over 40 seeds at 1,000, 10,000 and 100,000 distinct strings the root
// mean square error stays within 1.5 times that and no estimate is off by
// more than five (8%); in one run from 10 to 2,000,000 every estimate is
// within five, and strings added again change nothing. Each process
// hashes with a seed of its own, so the bounds leave chance a failure in
// about 10,000 runs: a bound of three standard errors (5%) on the estimator
// before failed a CI run (10,509 for 10,000; it read 3.0% high on average
// there).
func TestEstimateError(t *testing.T) {
	const se = 1.04 / 64
	for _, n := range []int{1000, 10_000, 100_000} {
		const seeds = 40
		var sq float64
		for range seeds {
			c := New(maphash.MakeSeed())
			for i := 0; i < n; i++ {
				c.Add("lim", "key-"+strconv.Itoa(i))
			}
			e := c.Estimate()/float64(n) - 1
			if math.Abs(e) > 5*se {
				t.Errorf("%d distinct: estimate off by %.1f%%, over five standard errors", n, 100*e)
			}
			sq += e * e
		}
		rms := math.Sqrt(sq / seeds)
		t.Logf("%d distinct: root mean square error %.2f%% over %d seeds", n, 100*rms, seeds)
		if rms > 1.5*se {
			t.Errorf("%d distinct: root mean square error %.2f%% over %d seeds, want at most %.2f%%", n, 100*rms, seeds, 150*se)
		}
	}
	c := New(maphash.MakeSeed())
	n := 0
	for _, want := range []int{10, 100, 1000, 10_000, 100_000, 1_000_000, 2_000_000} {
		for ; n < want; n++ {
			c.Add("lim", "key-"+strconv.Itoa(n))
		}
		got := c.Estimate()
		if math.Abs(got-float64(want)) > 5*se*float64(want)+1 {
			t.Errorf("%d distinct: estimate %.0f", want, got)
		}
		// The same strings again: no change.
		before := c.Estimate()
		for i := 0; i < min(want, 10_000); i++ {
			if c.Add("lim", "key-"+strconv.Itoa(i)) {
				t.Fatalf("key-%d added again changed the sketch", i)
			}
		}
		if c.Estimate() != before {
			t.Fatalf("estimate moved with strings seen before")
		}
	}
	// The two parts are one string with a separator: ("a", "bc") is not
	// ("ab", "c").
	d := New(maphash.MakeSeed())
	for i := 0; i < 1000; i++ {
		s := strconv.Itoa(i)
		d.Add("a", "b"+s)
		d.Add("ab", s)
	}
	if got := d.Estimate(); math.Abs(got-2000) > 5*se*2000 {
		t.Errorf("2000 distinct pairs read as %.0f", got)
	}
	d.Reset()
	if d.Estimate() != 0 {
		t.Errorf("after Reset: %v", d.Estimate())
	}
}

func BenchmarkAdd(b *testing.B) {
	c := New(maphash.MakeSeed())
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.Add("limiter", keys[i&4095])
	}
}
