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
	// Another limit or override: taken.
	c, err := Open(Options{Store: openRedisNoFlush(t), Config: with(func(c *wire.Config) { c.Limiters[0].Limit = 5; c.Limiters[0].Overrides = nil }), GCInterval: -1})
	if err != nil {
		t.Fatalf("another limit: %v, want it started", err)
	}
	c.Close()
	// Another period, mode and burst, a limiter more and one less: refused
	// (after waiting for the claim to lapse, which a live one does not),
	// naming each.
	differ := with(func(c *wire.Config) {
		c.Limiters[0].Period = int64(time.Minute)
		c.Limiters[1].Mode = wire.Strict
		c.Limiters[2].Burst = 30
		c.Limiters[3] = wire.LimiterConfig{Name: "new", Algorithm: wire.FixedWindow, Limit: 1, Period: int64(time.Second)}
	})
	c, err = Open(Options{Store: openRedisNoFlush(t), Config: differ, GCInterval: -1})
	if err == nil {
		c.Close()
		t.Fatal("limiters of other shapes started beside the running coordinator's")
	}
	for _, want := range []string{
		`limiter "fw" is (fixed_window per 1m0s, approximate) here and (fixed_window per 1s, approximate) on the others`,
		`limiter "sw" is (sliding_window per 1s, leased (auto or strict)) here and (sliding_window per 1s, approximate) on the others`,
		`limiter "tb" is (token_bucket per 1s, approximate, burst 30) here`,
		`limiter "new" runs here and not on the others`,
		`limiter "gcra" runs on the others and not here`,
		"every coordinator must run the same limiters",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
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
