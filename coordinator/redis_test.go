package coordinator

import (
	"context"
	"github.com/edgelimit/edgelimit/clock"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/internal/rediscluster"
	"github.com/edgelimit/edgelimit/wasm/wire"
	"github.com/redis/go-redis/v9"
)

// testStore, when set, opens the store of newTestCoordinator: the merge
// tests then run against it instead of Pebble in memory.
var testStore func(t testing.TB) merge.Store

var (
	clusterOnce sync.Once
	cluster     *rediscluster.Cluster
	clusterErr  error
)

// testCluster returns the package's Redis Cluster (3 masters, started on
// first use, stopped by TestMain), or skips when redis-server is missing.
func testCluster(t testing.TB) *rediscluster.Cluster {
	t.Helper()
	if err := rediscluster.Available(); err != nil {
		t.Skipf("SKIPPED: %v; the Redis Cluster store was not tested", err)
	}
	clusterOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cluster, clusterErr = rediscluster.Start(ctx, rediscluster.Options{Masters: 3})
	})
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return cluster
}

func stopTestCluster() {
	if cluster != nil {
		cluster.Stop()
	}
}

// openTestRedis empties the package's cluster and opens a redisstore.Store on it.
func openTestRedis(t testing.TB, o redisstore.Options) *redisstore.Store {
	t.Helper()
	cl := testCluster(t)
	ctx := context.Background()
	if err := cl.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	o.Addrs = cl.Addrs()
	s, err := redisstore.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMergeOnRedisCluster runs the merge tests of the Pebble store against
// a Redis Cluster of 3 masters (shared mode, shared.go).
func TestMergeOnRedisCluster(t *testing.T) {
	cl := testCluster(t)
	testStore = func(t testing.TB) merge.Store { return openTestRedis(t, redisstore.Options{Buckets: 16}) }
	defer func() { testStore = nil }()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"WindowedCountsAndWindows", TestWindowedCountsAndWindows},
		{"BucketTAT", TestBucketTAT},
		{"OverrideLimit", TestOverrideLimit},
		{"DuplicateNotAppliedTwice", TestDuplicateNotAppliedTwice},
		{"ResetKey", TestResetKey},
		{"OtherTokenCannotTakeOverIsolate", TestOtherTokenCannotTakeOverIsolate},
		{"SeqJumpRefusedWithoutTokens", TestSeqJumpRefusedWithoutTokens},
		{"IsolateIdentityCannotBeStolen", TestIsolateIdentityCannotBeStolen},
		{"KeyViewShowsOwnIsolatesOnly", TestKeyViewShowsOwnIsolatesOnly},
		{"RestartedIsolateStartsNewIncarnation", TestRestartedIsolateStartsNewIncarnation},
		{"FutureWindowRefused", TestFutureWindowRefused},
		{"StaleEntriesVisible", TestStaleEntriesVisible},
		{"HTTPSyncRoundTrip", TestHTTPSyncRoundTrip},
		{"LeasesWithinLimitPublic", TestLeasesWithinLimitPublic},
	} {
		t.Run(tc.name, tc.fn)
		// The test's writes went to the cluster (not to Pebble).
		if tc.name != "OverrideLimit" && clusterKeys(t, cl) == 0 {
			t.Fatalf("%s wrote nothing to Redis", tc.name)
		}
	}
}

// clusterKeys returns the number of keys on the masters of cl.
func clusterKeys(t *testing.T, cl *rediscluster.Cluster) int64 {
	t.Helper()
	s := openRedisNoFlush(t)
	defer s.Close()
	var n atomic.Int64
	err := s.Client().ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		k, err := c.DBSize(ctx).Result()
		n.Add(k)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n.Load()
}

// TestRedisTwoCoordinatorsOneKey: two coordinators over one cluster serve
// the same strict and approximate keys concurrently, each isolate failing
// over between them at random; every delta is counted exactly once and
// strict never grants past the limit.
func TestRedisTwoCoordinatorsOneKey(t *testing.T) {
	clk := &fakeClock{}
	clk.set(t0)
	open := func() *Coordinator {
		c, err := Open(Options{Store: openRedisNoFlush(t), Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	openTestRedis(t, redisstore.Options{}).Close() // flush
	cs := []*Coordinator{open(), open()}
	const isolates, rounds = 8, 40
	var mu sync.Mutex
	var admitted int64
	var wg sync.WaitGroup
	for i := 0; i < isolates; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			lease := int64(0)
			for seq := int64(1); seq <= rounds; seq++ {
				// Admit within the lease only; ask for 5 more.
				use := min(lease, 5)
				b := batch("iso"+string(rune('a'+i)), seq, t0,
					wire.Delta{Limiter: "sfw", Key: "hot", Window: 1000, Delta: use, Demand: 5},
					wire.Delta{Limiter: "fw", Key: "hot", Window: 1000, Delta: 1})
				c := cs[(i+int(seq))%2]
				rp, err := c.Sync(context.Background(), b)
				if err != nil {
					t.Errorf("iso %d seq %d: %v", i, seq, err)
					return
				}
				if seq%7 == 0 { // a retry to the other coordinator: a duplicate
					if _, err := cs[(i+int(seq)+1)%2].Sync(context.Background(), b); err != nil {
						t.Errorf("iso %d seq %d retry: %v", i, seq, err)
						return
					}
				}
				mu.Lock()
				admitted += use
				mu.Unlock()
				lease = max(viewOf(t, rp, "sfw", "hot").Lease, 0)
			}
		}(i)
	}
	wg.Wait()
	if admitted > 100 {
		t.Fatalf("strict admitted %d > limit 100", admitted)
	}
	ks := getKey(t, cs[0], "fw", "hot")
	if ks.Count != isolates*rounds {
		t.Fatalf("fw count %d, want %d (each delta once)", ks.Count, isolates*rounds)
	}
	ss := getKey(t, cs[1], "sfw", "hot")
	if ss.Count != admitted || ss.Count+ss.LeaseSum > 100 {
		t.Fatalf("sfw count %d (admitted %d) + leases %d, limit 100", ss.Count, admitted, ss.LeaseSum)
	}
	if admitted == 0 {
		t.Fatal("strict admitted nothing")
	}
	if d := cs[0].mergeStats().Duplicates + cs[1].mergeStats().Duplicates; d == 0 {
		t.Fatal("no retry was answered as a duplicate")
	}
}

// openRedisNoFlush opens a redisstore.Store on the package's cluster as it is.
func openRedisNoFlush(t testing.TB) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(context.Background(), redisstore.Options{Addrs: testCluster(t).Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRedisRecordsExpire: every record is written with a TTL, so old
// windows and idle isolates leave Redis without a GC pass: a windowed key
// until its window is older than the previous one (plus a period and a
// minute), the isolate's marks after IsolateTTL.
func TestRedisRecordsExpire(t *testing.T) {
	rs := openTestRedis(t, redisstore.Options{Buckets: 16})
	clk := &fakeClock{}
	clk.set(t0 + sec/2) // window 1000 of the 1 s limiters
	c, err := Open(Options{Store: rs, Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1}))
	ctx := context.Background()
	skey := []byte(merge.KeyStorageKey("fw", "k"))
	ttl, err := rs.Client().PTTL(ctx, rs.RedisKey(skey)).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Useful until window 1002 begins (t0 + 2 s): 1.5 s from now, + 1 s + 1 min.
	if want := 62500 * time.Millisecond; ttl <= 0 || ttl > want || ttl < want-5*time.Second {
		t.Fatalf("key record TTL %v, want about %v", ttl, want)
	}
	for _, k := range []string{rs.Tag(rs.Bucket(skey)) + "ma", rs.RedisKey([]byte(merge.HWMStorageKey("a")))} {
		ttl, err := rs.Client().PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < 23*time.Hour || ttl > 24*time.Hour {
			t.Fatalf("mark %q TTL %v, want IsolateTTL (24h)", k, ttl)
		}
	}
}
