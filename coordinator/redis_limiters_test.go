package coordinator

import (
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestRedisCoordinatorsRunTheSameLimiters: coordinators on one cluster must
// read its records alike. One whose limiter has another period (or
// algorithm, mode, burst), or that runs a limiter the others do not, is
// refused at start, naming each difference; before, it started, and the
// same key's record was rewritten in its terms at each write (10 counted
// of 60 admitted through two coordinators, 1 h and 1 min windows). Another
// limit or override is taken (the control API changes them for all), and
// so is another shape once every coordinator stopped.
func TestRedisCoordinatorsRunTheSameLimiters(t *testing.T) {
	first := openTestRedis(t, redisstore.Options{})
	cfg := testConfig()
	a, err := Open(Options{Store: first, Config: cfg, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	with := func(change func(*wire.Config)) wire.Config {
		c := cfg
		c.Limiters = append([]wire.LimiterConfig(nil), cfg.Limiters...)
		change(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  wire.Config
		want string // "" starts
	}{
		{"another limit", with(func(c *wire.Config) { c.Limiters[0].Limit = 5; c.Limiters[0].Overrides = nil }), ""},
		{"another period", with(func(c *wire.Config) { c.Limiters[0].Period = int64(time.Minute) }),
			`limiter "fw" is (fixed_window per 1m0s, approximate) here and (fixed_window per 1s, approximate) on the others`},
		{"another mode", with(func(c *wire.Config) { c.Limiters[0].Mode = wire.Strict }), `limiter "fw" is (fixed_window per 1s, leased (auto or strict)) here`},
		{"another burst", with(func(c *wire.Config) { c.Limiters[2].Burst = 30 }), `limiter "tb" is (token_bucket per 1s, approximate, burst 30) here`},
		{"one more", with(func(c *wire.Config) {
			c.Limiters = append(c.Limiters, wire.LimiterConfig{Name: "new", Algorithm: wire.FixedWindow, Limit: 1, Period: int64(time.Second)})
		}), `limiter "new" runs here and not on the others`},
		{"one less", with(func(c *wire.Config) { c.Limiters = c.Limiters[1:] }), `limiter "fw" runs on the others and not here`},
	} {
		c, err := Open(Options{Store: openRedisNoFlush(t), Config: tc.cfg, GCInterval: -1})
		if err == nil {
			c.Close()
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it started", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "every coordinator must run the same limiters")):
			t.Errorf("%s: %v, want refused with %q", tc.name, err, tc.want)
		}
	}
	// Every coordinator stopped (Close gives the claim back), the new
	// shape starts at once (a period raised: TestRedisPeriodRaisedRefits).
	a.Close()
	b, err := Open(Options{Store: openRedisNoFlush(t), Config: with(func(c *wire.Config) { c.Limiters[0].Period = int64(time.Minute) }), GCInterval: -1})
	if err != nil {
		t.Fatalf("the new shape once the others stopped: %v", err)
	}
	b.Close()
}
