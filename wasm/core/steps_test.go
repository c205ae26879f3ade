package core_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Step tables in the style of golang.org/x/time/rate's tests: a time ladder
// and, for each step, the time, the cost and the decision expected. One
// helper (runSteps) runs every table.

const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
	day = 24 * 3600 * sec
)

// step is one decision of a table. Every field of the result is checked.
type step struct {
	t     int64  // time, ns
	key   string // "" means "k"
	cost  int64
	ok    bool  // want Allowed
	rem   int64 // want Remaining
	reset int64 // want Reset, ns (absolute)
	retry int64 // want RetryAfter, ns (0 when allowed, -1 never)
}

func mustCore(t testing.TB, cfg wire.Config) *core.Core {
	t.Helper()
	if cfg.Version == 0 {
		cfg.Version = wire.Version
	}
	c, err := core.New(cfg)
	if err != nil {
		t.Fatalf("core.New: %v", err)
	}
	return c
}

func oneLimiter(l wire.LimiterConfig) wire.Config {
	if l.Name == "" {
		l.Name = "l"
	}
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{l}}
}

func fmtNs(ns int64) string {
	if ns == -1 || ns == 0 {
		return fmt.Sprint(ns)
	}
	return fmt.Sprintf("%d (%v)", ns, time.Duration(ns))
}

// runSteps runs the table against limiter 0 of c and reports every
// mismatch with the step number.
func runSteps(t *testing.T, c *core.Core, wantLimit int64, steps []step) {
	t.Helper()
	for i, s := range steps {
		key := s.key
		if key == "" {
			key = "k"
		}
		var r core.Result
		if err := c.Decide(0, []byte(key), s.cost, s.t, &r); err != nil {
			t.Fatalf("step %d: Decide(%q, cost %d, t %s): %v", i, key, s.cost, fmtNs(s.t), err)
		}
		where := fmt.Sprintf("step %d (key %q, t %s, cost %d)", i, key, fmtNs(s.t), s.cost)
		if r.Allowed != s.ok {
			t.Errorf("%s: allowed = %v, want %v (result %+v)", where, r.Allowed, s.ok, r)
		}
		if r.Remaining != s.rem {
			t.Errorf("%s: remaining = %d, want %d", where, r.Remaining, s.rem)
		}
		if r.Reset != s.reset {
			t.Errorf("%s: reset = %s, want %s", where, fmtNs(r.Reset), fmtNs(s.reset))
		}
		if r.RetryAfter != s.retry {
			t.Errorf("%s: retry after = %s, want %s", where, fmtNs(r.RetryAfter), fmtNs(s.retry))
		}
		if wantLimit > 0 && r.Limit != wantLimit && s.key == "" {
			t.Errorf("%s: limit = %d, want %d", where, r.Limit, wantLimit)
		}
		if r.Limiter != 0 {
			t.Errorf("%s: limiter = %d, want 0", where, r.Limiter)
		}
	}
}

func TestFixedWindowSteps(t *testing.T) {
	P := 10 * sec
	t0 := 100 * sec // start of window 10
	c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.FixedWindow, Limit: 5, Period: P}))
	runSteps(t, c, 5, []step{
		{t: t0, cost: 1, ok: true, rem: 4, reset: t0 + P},
		{t: t0 + 1*sec, cost: 3, ok: true, rem: 1, reset: t0 + P},
		// cost > remaining: denied until the window ends, nothing consumed
		{t: t0 + 2*sec, cost: 2, ok: false, rem: 1, reset: t0 + P, retry: 8 * sec},
		// peek does not consume
		{t: t0 + 2*sec, cost: 0, ok: true, rem: 1, reset: t0 + P},
		{t: t0 + 2*sec, cost: 0, ok: true, rem: 1, reset: t0 + P},
		{t: t0 + 3*sec, cost: 1, ok: true, rem: 0, reset: t0 + P},
		{t: t0 + 3*sec, cost: 0, ok: true, rem: 0, reset: t0 + P},
		// cost above the limit can never pass
		{t: t0 + 4*sec, cost: 6, ok: false, rem: 0, reset: t0 + P, retry: -1},
		// last ns of the window
		{t: t0 + P - 1, cost: 1, ok: false, rem: 0, reset: t0 + P, retry: 1},
		// window boundary: a fresh window, a full burst at once
		{t: t0 + P, cost: 5, ok: true, rem: 0, reset: t0 + 2*P},
		{t: t0 + P, cost: 1, ok: false, rem: 0, reset: t0 + 2*P, retry: P},
		// skipping a whole window
		{t: t0 + 2*P + 5*sec, cost: 1, ok: true, rem: 4, reset: t0 + 3*P},
		{t: t0 + 2*P + 5*sec, cost: 5, ok: false, rem: 4, reset: t0 + 3*P, retry: 5 * sec},
		{t: t0 + 2*P + 5*sec, cost: 4, ok: true, rem: 0, reset: t0 + 3*P},
	})
	st := c.Stats()
	if st.Decisions != 14 || st.Denials != 5 || st.Keys != 1 || st.Errors != 0 {
		t.Errorf("stats = %+v, want 14 decisions, 5 denials, 1 key, 0 errors", st)
	}
}

func TestSlidingWindowSteps(t *testing.T) {
	P := 10 * sec
	t0 := 100 * sec
	c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.SlidingWindow, Limit: 10, Period: P}))
	runSteps(t, c, 10, []step{
		{t: t0, cost: 4, ok: true, rem: 6, reset: t0 + P},
		{t: t0 + 5*sec, cost: 6, ok: true, rem: 0, reset: t0 + P},
		// the current window alone is full: wait for the boundary
		{t: t0 + 9*sec, cost: 1, ok: false, rem: 0, reset: t0 + P, retry: 1 * sec},
		// boundary: the previous window (10) weighs fully at elapsed 0;
		// 1 fits once its weight is 9, i.e. after 1 s.
		{t: t0 + P, cost: 1, ok: false, rem: 0, reset: t0 + 2*P, retry: 1 * sec},
		{t: t0 + P + 1*sec, cost: 1, ok: true, rem: 0, reset: t0 + 2*P},
		// used = 1 + 10*8/10 = 9; 2 more fit when the weight is 7 (elapsed 3 s)
		{t: t0 + P + 2*sec, cost: 2, ok: false, rem: 1, reset: t0 + 2*P, retry: 1 * sec},
		// the weighted previous count rounds down: 10*7.5/10 = 7
		{t: t0 + P + 2500*ms, cost: 2, ok: true, rem: 0, reset: t0 + 2*P},
		{t: t0 + P + 5*sec, cost: 0, ok: true, rem: 2, reset: t0 + 2*P},
		// next window: previous is 3, weighing 3 at elapsed 0
		{t: t0 + 2*P, cost: 7, ok: true, rem: 0, reset: t0 + 3*P},
		// cost above the limit
		{t: t0 + 2*P + 5*sec, cost: 11, ok: false, rem: 2, reset: t0 + 3*P, retry: -1},
		// two windows later nothing is left of the past
		{t: t0 + 4*P, cost: 10, ok: true, rem: 0, reset: t0 + 5*P},
	})
}

// bucketSteps is shared by token_bucket and gcra, which the core implements
// alike: 10 per 10 s (1 unit per second), capacity 5.
func bucketSteps(t0 int64) []step {
	return []step{
		// a full bucket admits the whole burst at once
		{t: t0, cost: 5, ok: true, rem: 0, reset: t0 + 5*sec},
		{t: t0, cost: 1, ok: false, rem: 0, reset: t0 + 5*sec, retry: 1 * sec},
		{t: t0 + 500*ms, cost: 1, ok: false, rem: 0, reset: t0 + 5*sec, retry: 500 * ms},
		{t: t0 + 1*sec, cost: 1, ok: true, rem: 0, reset: t0 + 6*sec},
		// peek
		{t: t0 + 1*sec, cost: 0, ok: true, rem: 0, reset: t0 + 6*sec},
		// cost > remaining: 2 available, 3 asked
		{t: t0 + 3*sec, cost: 3, ok: false, rem: 2, reset: t0 + 6*sec, retry: 1 * sec},
		{t: t0 + 3*sec, cost: 0, ok: true, rem: 2, reset: t0 + 6*sec},
		{t: t0 + 3*sec, cost: 2, ok: true, rem: 0, reset: t0 + 8*sec},
		// cost above the capacity (but below the limit per period) never passes
		{t: t0 + 3*sec, cost: 6, ok: false, rem: 0, reset: t0 + 8*sec, retry: -1},
		// a long idle time does not fill beyond the capacity
		{t: t0 + 100*sec, cost: 0, ok: true, rem: 5, reset: t0 + 100*sec},
		{t: t0 + 100*sec, cost: 5, ok: true, rem: 0, reset: t0 + 105*sec},
		{t: t0 + 200*sec, cost: 4, ok: true, rem: 1, reset: t0 + 204*sec},
		{t: t0 + 200*sec, cost: 1, ok: true, rem: 0, reset: t0 + 205*sec},
	}
}

func TestTokenBucketSteps(t *testing.T) {
	c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.TokenBucket, Limit: 10, Period: 10 * sec, Burst: 5}))
	runSteps(t, c, 5, bucketSteps(100*sec)) // the limit reported for a bucket is its capacity
}

func TestGCRASteps(t *testing.T) {
	t.Run("burst5", func(t *testing.T) {
		c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.GCRA, Limit: 10, Period: 10 * sec, Burst: 5}))
		runSteps(t, c, 5, bucketSteps(100*sec))
	})
	t.Run("burst0", func(t *testing.T) {
		// 4 per second, burst 0 = limit: emission interval 250 ms, tolerance 1 s.
		c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.GCRA, Limit: 4, Period: sec}))
		runSteps(t, c, 4, []step{
			{t: 0, cost: 1, ok: true, rem: 3, reset: 250 * ms},
			{t: 0, cost: 3, ok: true, rem: 0, reset: 1 * sec},
			{t: 0, cost: 1, ok: false, rem: 0, reset: 1 * sec, retry: 250 * ms},
			{t: 100 * ms, cost: 1, ok: false, rem: 0, reset: 1 * sec, retry: 150 * ms},
			{t: 250 * ms, cost: 1, ok: true, rem: 0, reset: 1250 * ms},
			{t: 1250 * ms, cost: 0, ok: true, rem: 4, reset: 1250 * ms},
			{t: 1500 * ms, cost: 2, ok: true, rem: 2, reset: 2 * sec},
			{t: 1500 * ms, cost: 5, ok: false, rem: 2, reset: 2 * sec, retry: -1},
		})
	})
}

func TestPeriodOneMillisecond(t *testing.T) {
	t.Run("fixed_window", func(t *testing.T) {
		c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.FixedWindow, Limit: 2, Period: ms}))
		runSteps(t, c, 2, []step{
			{t: 0, cost: 1, ok: true, rem: 1, reset: ms},
			{t: 500_000, cost: 1, ok: true, rem: 0, reset: ms},
			{t: ms - 1, cost: 1, ok: false, rem: 0, reset: ms, retry: 1},
			{t: ms, cost: 2, ok: true, rem: 0, reset: 2 * ms},
			{t: 1000 * ms, cost: 1, ok: true, rem: 1, reset: 1001 * ms},
		})
	})
	t.Run("token_bucket", func(t *testing.T) {
		// 1000 per ms: one unit per microsecond.
		c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.TokenBucket, Limit: 1000, Period: ms}))
		runSteps(t, c, 1000, []step{
			{t: 0, cost: 1000, ok: true, rem: 0, reset: ms},
			{t: 0, cost: 1, ok: false, rem: 0, reset: ms, retry: 1000},
			{t: 1000, cost: 1, ok: true, rem: 0, reset: ms + 1000},
			{t: 11000, cost: 10, ok: true, rem: 0, reset: ms + 11000},
		})
	})
}

func TestPeriodThirtyOneDays(t *testing.T) {
	P := wire.MaxPeriod
	if P != 31*day {
		t.Fatalf("MaxPeriod = %d, want 31 days", P)
	}
	t0 := 50 * P // aligned to a window start, ~4.2 years of ns
	t.Run("fixed_window", func(t *testing.T) {
		c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.FixedWindow, Limit: 3, Period: P}))
		runSteps(t, c, 3, []step{
			{t: t0 + day, cost: 3, ok: true, rem: 0, reset: t0 + P},
			{t: t0 + 2*day, cost: 1, ok: false, rem: 0, reset: t0 + P, retry: 29 * day},
			{t: t0 + P, cost: 1, ok: true, rem: 2, reset: t0 + 2*P},
		})
	})
	t.Run("sliding_window", func(t *testing.T) {
		c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.SlidingWindow, Limit: 31, Period: P}))
		runSteps(t, c, 31, []step{
			{t: t0, cost: 31, ok: true, rem: 0, reset: t0 + P},
			// next window at +10 days: previous weighs 31*21/31 = 21
			{t: t0 + P + 10*day, cost: 10, ok: true, rem: 0, reset: t0 + 2*P},
			// 1 more fits when 21-decayed weight <= 20: one more day
			{t: t0 + P + 10*day, cost: 1, ok: false, rem: 0, reset: t0 + 2*P, retry: day},
		})
	})
	t.Run("token_bucket_max", func(t *testing.T) {
		// The largest limit and cost over the longest period: the products
		// do not fit in 64 bits, the core must not overflow.
		c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.TokenBucket, Limit: wire.MaxLimit, Period: P}))
		per := P / (wire.MaxLimit / wire.MaxCost) // ns one MaxCost takes to refill (1024 per period)
		runSteps(t, c, wire.MaxLimit, []step{
			{t: t0, cost: wire.MaxCost, ok: true, rem: wire.MaxLimit - wire.MaxCost, reset: t0 + per},
			{t: t0, cost: 0, ok: true, rem: wire.MaxLimit - wire.MaxCost, reset: t0 + per},
		})
	})
	t.Run("gcra_one_per_period", func(t *testing.T) {
		c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.GCRA, Limit: 1, Period: P}))
		runSteps(t, c, 1, []step{
			{t: t0, cost: 1, ok: true, rem: 0, reset: t0 + P},
			{t: t0 + sec, cost: 1, ok: false, rem: 0, reset: t0 + P, retry: P - sec},
			{t: t0 + P, cost: 1, ok: true, rem: 0, reset: t0 + 2*P},
		})
	})
}

func TestOverrides(t *testing.T) {
	t.Run("fixed_window", func(t *testing.T) {
		c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.FixedWindow, Limit: 2, Period: 10 * sec,
			Overrides: []wire.Override{{Key: "vip", Limit: 5}, {Key: "tiny", Limit: 1}}}))
		runSteps(t, c, 0, []step{
			{t: 0, cost: 2, ok: true, rem: 0, reset: 10 * sec},
			{t: 0, cost: 1, ok: false, rem: 0, reset: 10 * sec, retry: 10 * sec},
			{t: 0, key: "vip", cost: 4, ok: true, rem: 1, reset: 10 * sec},
			{t: 0, key: "vip", cost: 1, ok: true, rem: 0, reset: 10 * sec},
			{t: 0, key: "vip", cost: 1, ok: false, rem: 0, reset: 10 * sec, retry: 10 * sec},
			{t: 0, key: "tiny", cost: 2, ok: false, rem: 1, reset: 10 * sec, retry: -1},
			{t: 0, key: "tiny", cost: 1, ok: true, rem: 0, reset: 10 * sec},
		})
		var r core.Result
		if err := c.Decide(0, []byte("vip"), 0, 0, &r); err != nil || r.Limit != 5 {
			t.Errorf("vip: limit %d err %v, want 5", r.Limit, err)
		}
		if err := c.Decide(0, []byte("other"), 0, 0, &r); err != nil || r.Limit != 2 {
			t.Errorf("other: limit %d err %v, want 2", r.Limit, err)
		}
	})
	t.Run("token_bucket_burst0", func(t *testing.T) {
		// Burst 0: the override is also the capacity.
		c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: wire.TokenBucket, Limit: 2, Period: 2 * sec,
			Overrides: []wire.Override{{Key: "vip", Limit: 10}}}))
		runSteps(t, c, 0, []step{
			{t: 0, cost: 2, ok: true, rem: 0, reset: 2 * sec},
			{t: 0, cost: 3, ok: false, rem: 0, reset: 2 * sec, retry: -1},
			{t: 0, key: "vip", cost: 10, ok: true, rem: 0, reset: 2 * sec},
			// vip refills at 10 per 2 s: one unit per 200 ms
			{t: 200 * ms, key: "vip", cost: 1, ok: true, rem: 0, reset: 2200 * ms},
		})
	})
}

func TestTimeGoesBackwards(t *testing.T) {
	for _, alg := range []string{wire.FixedWindow, wire.SlidingWindow, wire.TokenBucket, wire.GCRA} {
		t.Run(alg, func(t *testing.T) {
			P := 10 * sec
			c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: alg, Limit: 4, Period: P}))
			var r core.Result
			dec := func(now, cost int64) {
				t.Helper()
				if err := c.Decide(0, []byte("k"), cost, now, &r); err != nil {
					t.Fatalf("Decide(t=%d): %v", now, err)
				}
			}
			dec(2*P, 2) // the key has seen time 2P (start of window 2)
			dec(2*P-1, 2)
			// Clamped to 2P: same window, consumption counted there.
			if !r.Allowed {
				t.Fatalf("backwards decision in the same budget denied: %+v", r)
			}
			if r.Reset < 2*P {
				t.Errorf("reset %d before the latest time seen %d", r.Reset, 2*P)
			}
			dec(0, 1)
			if r.Allowed || r.RetryAfter <= 0 {
				t.Errorf("budget of 4 used at the clamped time: want denied with retry > 0, got %+v", r)
			}
			if r.Reset < 2*P || r.RetryAfter > P {
				t.Errorf("clamped decision: reset %d retry %d, want reset >= %d and retry <= period", r.Reset, r.RetryAfter, 2*P)
			}
			if got := c.Stats().ClockBackwards; got != 2 {
				t.Errorf("ClockBackwards = %d, want 2", got)
			}
			// Time moving forward again is not counted.
			dec(3*P, 0)
			if got := c.Stats().ClockBackwards; got != 2 {
				t.Errorf("ClockBackwards after a forward step = %d, want 2", got)
			}
			// Time is per key: another key at an earlier time is not backwards.
			if err := c.Decide(0, []byte("other"), 1, P, &r); err != nil || !r.Allowed {
				t.Fatalf("other key: %v %+v", err, r)
			}
			if got := c.Stats().ClockBackwards; got != 2 {
				t.Errorf("ClockBackwards after another key = %d, want 2", got)
			}
		})
	}
}

func TestResetKey(t *testing.T) {
	for _, alg := range []string{wire.FixedWindow, wire.SlidingWindow, wire.TokenBucket, wire.GCRA} {
		t.Run(alg, func(t *testing.T) {
			c := mustCore(t, oneLimiter(wire.LimiterConfig{Algorithm: alg, Limit: 3, Period: 60 * sec}))
			var r core.Result
			for _, k := range []string{"a", "b"} {
				if err := c.Decide(0, []byte(k), 3, sec, &r); err != nil || !r.Allowed {
					t.Fatalf("%s: %v %+v", k, err, r)
				}
			}
			if err := c.Decide(0, []byte("a"), 1, sec, &r); err != nil || r.Allowed {
				t.Fatalf("a should be exhausted: %v %+v", err, r)
			}
			if err := c.Reset(0, []byte("a")); err != nil {
				t.Fatalf("Reset: %v", err)
			}
			if got := c.Stats().Keys; got != 1 {
				t.Errorf("keys after reset = %d, want 1", got)
			}
			if err := c.Decide(0, []byte("a"), 3, sec, &r); err != nil || !r.Allowed || r.Remaining != 0 {
				t.Errorf("a after reset: want the full budget of 3 admitted, got %v %+v", err, r)
			}
			// b is untouched.
			if err := c.Decide(0, []byte("b"), 1, sec, &r); err != nil || r.Allowed {
				t.Errorf("b must still be exhausted: %v %+v", err, r)
			}
			// Resetting a key never seen is not an error.
			if err := c.Reset(0, []byte("never")); err != nil {
				t.Errorf("Reset of an unknown key: %v", err)
			}
			before := c.Stats().Errors
			if err := c.Reset(5, []byte("a")); !errors.Is(err, core.ErrUnknownLimiter) {
				t.Errorf("Reset(unknown limiter) = %v", err)
			}
			if err := c.Reset(0, nil); !errors.Is(err, core.ErrEmptyKey) {
				t.Errorf("Reset(empty key) = %v", err)
			}
			if got := c.Stats().Errors - before; got != 2 {
				t.Errorf("errors counted by Reset = %d, want 2", got)
			}
		})
	}
}

// multiCfg is a per-customer limiter and a global one.
func multiCfg(mode string) wire.Config {
	return wire.Config{Version: wire.Version, IsolateID: "iso-1", Limiters: []wire.LimiterConfig{
		{Name: "customer", Algorithm: wire.FixedWindow, Limit: 3, Period: 60 * sec, Mode: mode},
		{Name: "global", Algorithm: wire.TokenBucket, Limit: 5, Period: 60 * sec, Mode: mode},
	}}
}

func TestDecideMultiAllOrNothing(t *testing.T) {
	c := mustCore(t, multiCfg(""))
	cust, glob := c.LimiterIndex("customer"), c.LimiterIndex("global")
	if cust != 0 || glob != 1 || c.LimiterIndex("nope") != -1 {
		t.Fatalf("LimiterIndex: %d %d %d", cust, glob, c.LimiterIndex("nope"))
	}
	now := 10 * sec
	peek := func(lim int, key string) int64 {
		t.Helper()
		var r core.Result
		if err := c.Decide(lim, []byte(key), 0, now, &r); err != nil {
			t.Fatal(err)
		}
		return r.Remaining
	}
	multi := func(customer string, cost int64) core.Result {
		t.Helper()
		var r core.Result
		err := c.DecideMulti([]core.Check{
			{Limiter: cust, Key: []byte(customer), Cost: cost},
			{Limiter: glob, Key: []byte("all"), Cost: cost},
		}, now, &r)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	type want struct {
		customer string
		cost     int64
		ok       bool
		binding  int
		rem      int64
		custRem  int64 // customer's remaining afterwards
		globRem  int64 // global remaining afterwards
	}
	for i, w := range []want{
		// allowed: the binding limiter is the one with the least remaining
		{"acme", 1, true, cust, 2, 2, 4},
		{"acme", 2, true, cust, 0, 0, 2},
		// the customer denies: the global limiter does not consume
		{"acme", 1, false, cust, 0, 0, 2},
		{"beta", 1, true, glob, 1, 2, 1},
		// the global limiter denies: the customer does not consume
		{"beta", 2, false, glob, 1, 2, 1},
		{"gamma", 2, false, glob, 1, 3, 1},
		{"gamma", 1, true, glob, 0, 2, 0},
		// both deny: the first denying check binds
		{"acme", 1, false, cust, 0, 0, 0},
	} {
		r := multi(w.customer, w.cost)
		if r.Allowed != w.ok || r.Limiter != w.binding || r.Remaining != w.rem {
			t.Errorf("step %d %+v: got allowed %v binding %d remaining %d", i, w, r.Allowed, r.Limiter, r.Remaining)
		}
		if !r.Allowed && r.RetryAfter == 0 {
			t.Errorf("step %d: denied with RetryAfter 0", i)
		}
		if got := peek(cust, w.customer); got != w.custRem {
			t.Errorf("step %d: customer %s remaining %d, want %d", i, w.customer, got, w.custRem)
		}
		if got := peek(glob, "all"); got != w.globRem {
			t.Errorf("step %d: global remaining %d, want %d", i, got, w.globRem)
		}
	}
	// Nothing denied was consumed, so the only batch holds the admitted cost.
	out, err := c.SyncOut(now, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b wire.Batch
	if err := b.UnmarshalMsg(out); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, d := range b.Entries {
		got[d.Limiter+"/"+d.Key] += d.Delta
	}
	wantDeltas := map[string]int64{"customer/acme": 3, "customer/beta": 1, "customer/gamma": 1, "global/all": 5}
	for k, v := range wantDeltas {
		if got[k] != v {
			t.Errorf("batch delta %s = %d, want %d (batch %+v)", k, got[k], v, b.Entries)
		}
	}
	if len(got) != len(wantDeltas) {
		t.Errorf("batch has %v, want %v", got, wantDeltas)
	}
}

func TestDecideMultiErrors(t *testing.T) {
	c := mustCore(t, multiCfg(""))
	var r core.Result
	ok := core.Check{Limiter: 0, Key: []byte("a"), Cost: 1}
	for _, tc := range []struct {
		name   string
		checks []core.Check
		now    int64
		want   error
	}{
		{"none", nil, 0, core.ErrTooManyChecks},
		{"nine", []core.Check{ok, ok, ok, ok, ok, ok, ok, ok, ok}, 0, core.ErrTooManyChecks},
		{"unknown limiter", []core.Check{ok, {Limiter: 2, Key: []byte("a")}}, 0, core.ErrUnknownLimiter},
		{"empty key", []core.Check{ok, {Limiter: 1}}, 0, core.ErrEmptyKey},
		{"bad cost", []core.Check{ok, {Limiter: 1, Key: []byte("a"), Cost: -1}}, 0, core.ErrBadCost},
		{"bad time", []core.Check{ok}, -1, core.ErrBadTime},
	} {
		before := c.Stats()
		if err := c.DecideMulti(tc.checks, tc.now, &r); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		after := c.Stats()
		if after.Errors != before.Errors+1 || after.Decisions != before.Decisions || after.Keys != before.Keys {
			t.Errorf("%s: stats before %+v after %+v: want one more error and nothing else", tc.name, before, after)
		}
	}
	// A valid check before an invalid one consumed nothing.
	if err := c.Decide(0, []byte("a"), 3, 0, &r); err != nil || !r.Allowed {
		t.Errorf("customer a must still have its full budget: %v %+v", err, r)
	}
	// Eight checks is the maximum and is fine.
	if err := c.DecideMulti([]core.Check{ok, ok, ok, ok, ok, ok, ok, ok}, 0, &r); err != nil {
		t.Errorf("eight checks: %v", err)
	}
}

// The result passed to DecideMulti may be reused from an earlier call (the
// guest keeps one Result for its fast path): nothing of the old value may
// leak into the new decision.
func TestDecideMultiIgnoresPreviousResult(t *testing.T) {
	c := mustCore(t, wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 1000, Period: 60 * sec},
		{Name: "b", Algorithm: wire.FixedWindow, Limit: 1000, Period: 60 * sec},
	}})
	checks := []core.Check{{Limiter: 0, Key: []byte("x"), Cost: 1}, {Limiter: 1, Key: []byte("y"), Cost: 1}}
	var fresh core.Result
	if err := c.DecideMulti(checks, sec, &fresh); err != nil {
		t.Fatal(err)
	}
	if fresh.SyncWanted {
		t.Fatalf("1 of 1000 used on one isolate should not ask for a sync: %+v", fresh)
	}
	c2 := mustCore(t, c.Config())
	reused := core.Result{Allowed: false, SyncWanted: true, Limiter: 1, Limit: 7, Remaining: 7, Reset: 7, RetryAfter: 7}
	if err := c2.DecideMulti(checks, sec, &reused); err != nil {
		t.Fatal(err)
	}
	if reused != fresh {
		t.Errorf("DecideMulti into a reused Result = %+v, into a fresh one = %+v", reused, fresh)
	}
}
