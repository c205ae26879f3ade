package benchmarks

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The Redis peers limit as their algorithms say, against a real
// redis-server on loopback: the fixed window admits exactly its limit per
// window, GCRA its burst and then one per emission interval.
func TestRedisPeersLimit(t *testing.T) {
	ctx := context.Background()
	r, err := StartRedis(ctx, "")
	if errors.Is(err, ErrNoRedis) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	t0 := time.Unix(1000, 0)
	count := func(f func(i int) (bool, error), n int) int {
		t.Helper()
		ok := 0
		for i := 0; i < n; i++ {
			a, err := f(i)
			if err != nil {
				t.Fatal(err)
			}
			if a {
				ok++
			}
		}
		return ok
	}
	// 10 per second: 25 requests in window 1000 admit 10, then 10 more in 1001.
	fw := func(at time.Time) func(int) (bool, error) {
		return func(int) (bool, error) { return RedisFixedWindow(ctx, r.Client, "fw", 10, time.Second, at) }
	}
	if n := count(fw(t0), 25); n != 10 {
		t.Fatalf("fixed window admitted %d of 25, want 10", n)
	}
	if n := count(fw(t0.Add(time.Second)), 25); n != 10 {
		t.Fatalf("next window admitted %d of 25, want 10", n)
	}
	// GCRA 10/s with a burst of 5 at one instant: 5; 100 ms later one more.
	g := func(at time.Time) func(int) (bool, error) {
		return func(int) (bool, error) { return RedisGCRA(ctx, r.Client, "g", 10, 5, time.Second, at) }
	}
	if n := count(g(t0), 20); n != 5 {
		t.Fatalf("gcra burst admitted %d of 20, want 5", n)
	}
	if n := count(g(t0.Add(100*time.Millisecond)), 5); n != 1 {
		t.Fatalf("gcra after one emission interval admitted %d, want 1", n)
	}
}
