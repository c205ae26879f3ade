package sim

import (
	"fmt"
	"math"
	"testing"
)

// The error histogram's mean and quantiles, to its 0.5-point buckets, and
// errors past +-100% clamped to the ends.
func TestRemainingErrQuantiles(t *testing.T) {
	var r remainingErr
	if r.mean() != 0 || r.quantile(0.99) != 0 {
		t.Fatalf("no answer: mean %v, p99 %v; want 0 and 0", r.mean(), r.quantile(0.99))
	}
	for i := 0; i < 98; i++ {
		r.add(0)
	}
	r.add(10)
	r.add(250)
	if got := r.mean(); math.Abs(got-2.6) > 1e-9 {
		t.Errorf("mean %v, want 2.6 (260 over 100 answers)", got)
	}
	if p50, p99, p100 := r.quantile(0.5), r.quantile(0.99), r.quantile(1); p50 != 0 || p99 != 10 || p100 != 100 {
		t.Errorf("p50 %v, p99 %v, max %v; want 0, 10 and 100 (clamped)", p50, p99, p100)
	}
	r.add(-0.3)
	if got := r.quantile(0.001); got != -0.5 {
		t.Errorf("least %v, want -0.5 (the bucket of -0.3)", got)
	}
}

// One isolate knows every admission of its key: its `remaining` is the
// truth on every admitted decision, on a fixed window and on a bucket.
// Many isolates answer from views up to a sync old, and read high by what
// the others admitted since.
func TestRemainingAgainstTheTruth(t *testing.T) {
	for _, alg := range []string{"fixed_window", "token_bucket"} {
		run := func(isolates int) Result {
			t.Helper()
			sc, err := ParseScenario([]byte(fmt.Sprintf(`{"name": "remaining", "isolates": %d, "duration": "10s",
				"config": {"limiters": [{"name": "a", "algorithm": %q, "limit": 100, "period": "1s"}]},
				"network": {"latency": {"dist": "fixed", "mean": "20ms"}},
				"traffic": [{"limiter": "a", "rate": 150}]}`, isolates, alg)), "")
			if err != nil {
				t.Fatal(err)
			}
			return runScenario(t, sc, Auto)
		}
		one := run(1)
		if one.Admitted == 0 || one.RemainingErrPct != 0 || one.RemainingHighP99Pct != 0 {
			t.Errorf("%s, one isolate: %d admitted, remaining off by %.2f%% on average, p99 %.1f%%; want exact", alg, one.Admitted, one.RemainingErrPct, one.RemainingHighP99Pct)
		}
		many := run(16)
		t.Logf("%s, 16 isolates: remaining off by %.2f%% of the limit on average, p99 %.1f%%", alg, many.RemainingErrPct, many.RemainingHighP99Pct)
		if many.RemainingHighP99Pct <= 0 {
			t.Errorf("%s, 16 isolates: p99 error %.1f%%; want the others' admissions since the view to show", alg, many.RemainingHighP99Pct)
		}
	}
}
