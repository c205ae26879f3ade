package core_test

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestDecideMultiRepeatedKeySumsCost: a multi-check naming the same
// (limiter, key) several times is judged on the summed cost, for every
// algorithm: three checks of cost 3 against a limit of 6 are denied and
// consume nothing, two of cost 3 pass and use the whole limit.
func TestDecideMultiRepeatedKeySumsCost(t *testing.T) {
	for _, alg := range []string{wire.FixedWindow, wire.SlidingWindow, wire.TokenBucket, wire.GCRA} {
		t.Run(alg, func(t *testing.T) {
			c := mustCore(t, oneLimiter(wire.LimiterConfig{Name: "llm", Algorithm: alg, Limit: 6, Period: 60 * sec}))
			y := core.Check{Limiter: 0, Key: []byte("y"), Cost: 3}
			var r core.Result
			if err := c.DecideMulti([]core.Check{y, y, y}, sec, &r); err != nil {
				t.Fatal(err)
			}
			if r.Allowed {
				t.Fatalf("3 x cost 3 on one key with limit 6 admitted: %+v", r)
			}
			if err := c.DecideMulti([]core.Check{y, y}, sec, &r); err != nil || !r.Allowed || r.Remaining != 0 {
				t.Fatalf("2 x cost 3 with limit 6: %+v %v; want allowed with nothing remaining", r, err)
			}
			if err := c.Decide(0, []byte("y"), 1, sec, &r); err != nil || r.Allowed {
				t.Fatalf("after 6 of 6 a further request was admitted: %+v %v", r, err)
			}
		})
	}
}

// TestDecideMultiRepeatedKeyAmongOthers: the repeated key binds even when
// other keys and limiters are checked in between, all or nothing: the
// other checks are not charged when the summed cost is denied.
func TestDecideMultiRepeatedKeyAmongOthers(t *testing.T) {
	c := mustCore(t, wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "a", Algorithm: wire.FixedWindow, Limit: 4, Period: 60 * sec},
		{Name: "b", Algorithm: wire.FixedWindow, Limit: 100, Period: 60 * sec},
	}})
	checks := []core.Check{
		{Limiter: 0, Key: []byte("x"), Cost: 2},
		{Limiter: 1, Key: []byte("x"), Cost: 1}, // same key, other limiter: not merged
		{Limiter: 0, Key: []byte("z"), Cost: 1},
		{Limiter: 0, Key: []byte("x"), Cost: 3},
	}
	var r core.Result
	if err := c.DecideMulti(checks, sec, &r); err != nil {
		t.Fatal(err)
	}
	if r.Allowed || r.Limiter != 0 || r.Limit != 4 {
		t.Fatalf("a/x asked for 5 of 4: %+v, want denied by limiter a", r)
	}
	for _, k := range []struct {
		lim  int
		key  string
		want int64
	}{{0, "x", 4}, {1, "x", 100}, {0, "z", 4}} {
		if err := c.Decide(k.lim, []byte(k.key), 0, sec, &r); err != nil || r.Remaining != k.want {
			t.Errorf("limiter %d key %s: remaining %d (%v), want %d: a denied multi-check charged it", k.lim, k.key, r.Remaining, err, k.want)
		}
	}
	checks[3].Cost = 2 // 2+2 = 4 of 4
	if err := c.DecideMulti(checks, sec, &r); err != nil || !r.Allowed {
		t.Fatalf("a/x asked for 4 of 4: %+v %v", r, err)
	}
	if err := c.Decide(0, []byte("x"), 0, sec, &r); err != nil || r.Remaining != 0 {
		t.Fatalf("a/x after 4 of 4: remaining %d (%v), want 0", r.Remaining, err)
	}
}
