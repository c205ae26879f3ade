package distinct

import (
	"hash/maphash"
	"math"
	"strconv"
	"testing"
)

// The estimate is within 5% (three standard errors) from 10 to 2,000,000
// distinct strings, whatever the order, and strings added again change
// nothing.
func TestEstimateWithinFivePercent(t *testing.T) {
	c := New(maphash.MakeSeed())
	n := 0
	for _, want := range []int{10, 100, 1000, 10_000, 100_000, 1_000_000, 2_000_000} {
		for ; n < want; n++ {
			c.Add("lim", "key-"+strconv.Itoa(n))
		}
		got := c.Estimate()
		if math.Abs(got-float64(want)) > 0.05*float64(want)+1 {
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
	if got := d.Estimate(); got < 1900 || got > 2100 {
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
