package coordinator

import (
	"context"
	"errors"
	"testing"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/wasm/wire"
	"github.com/redis/go-redis/v9"
)

// TestRedisReincarnationHandsLeasesOver runs coordtest.Handover on a
// coordinator over a real Redis Cluster: the isolate's high-water mark
// (el:h<id>) is written back as it was 30 requests before, as a failover
// that lost the master's last writes of it leaves it, while the key
// records keep its leases. The new incarnation takes every one of them
// over (before, each stayed reserved as spent for the rest of its hour);
// with a wrong predecessor secret nothing moves.
func TestRedisReincarnationHandsLeasesOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    coordtest.HandoverCase
	}{{"handed-over", coordtest.HandoverCase{}}, {"at-stop", coordtest.HandoverCase{AtStop: true}}, {"wrong-secret", coordtest.HandoverCase{BadSecret: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			rs := openTestRedis(t, redisstore.Options{Buckets: 16})
			cfg := coordtest.HandoverConfig(wire.SlidingWindow, wire.Strict)
			clk := &fakeClock{}
			clk.set(coordtest.HandoverStart())
			c, err := Open(Options{Store: rs, Config: cfg, Clock: clock.Func(clk.now), GCInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testCluster(t).Addrs()})
			defer rc.Close()
			ctx := context.Background()
			key := "el:" + merge.HWMStorageKey("A")
			var mark map[string]string
			rig := coordtest.HandoverRig{
				Syncer: func() coordtest.Syncer { return c },
				Now:    clk.now,
				Step:   func() int64 { return clk.add(10 * 1e6) },
				SaveMark: func() {
					if mark, err = rc.HGetAll(ctx, key).Result(); err != nil || len(mark) == 0 {
						t.Fatalf("no mark of A at %s: %v", key, err)
					}
				},
				RollBack: func() {
					if err := rc.HSet(ctx, key, mark).Err(); err != nil {
						t.Fatal(err)
					}
				},
				SeqError: func(err error) bool { return errors.Is(err, merge.ErrSequence) },
				Stats:    func() (int64, int64) { s := c.mergeStats(); return s.Handovers, s.HandoversRefused },
			}
			coordtest.Handover(t, rig, cfg, tc.c)
		})
	}
}
