package coordinator

import (
	"context"
	"fmt"
	"github.com/edgelimit/edgelimit/clock"
	"strings"
	"sync"
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
		{"RetryOfAnAppliedBatchIsNoClockSkew", TestRetryOfAnAppliedBatchIsNoClockSkew},
		{"StaleEntriesVisible", TestStaleEntriesVisible},
		{"HTTPSyncRoundTrip", TestHTTPSyncRoundTrip},
		{"LeasesWithinLimitPublic", TestLeasesWithinLimitPublic},
		{"LimiterMetrics", TestLimiterMetrics},
		{"EdgeGrantCoversAsksAndDenials", TestEdgeGrantCoversAsksAndDenials},
		{"FutureAskAndDenialRefused", TestFutureAskAndDenialRefused},
		{"LeasesCannotFillAKey", TestLeasesCannotFillAKey},
		{"HugeCostBucketRecovers", TestHugeCostBucketRecovers},
		{"TokenQuotas", TestTokenQuotas},
		{"SparseIsolateStandsOverSeveralWindows", TestSparseIsolateStandsOverSeveralWindows},
		{"GracefulStopGivesLeasesBack", TestGracefulStopGivesLeasesBack},
		{"HeldCountsLiveLeasesSpent", TestHeldCountsLiveLeasesSpent},
		{"SparseCostlyAskGrantedNothing", TestSparseCostlyAskGrantedNothing},
	} {
		t.Run(tc.name, tc.fn)
		// The test's writes went to the cluster (not to Pebble).
		if tc.name != "OverrideLimit" && clusterKeys(t, cl) == 0 {
			t.Fatalf("%s wrote nothing to Redis", tc.name)
		}
	}
}

// clusterKeys returns the number of keys on the masters of cl, less the
// store's settings (el:meta).
func clusterKeys(t *testing.T, cl *rediscluster.Cluster) int64 {
	t.Helper()
	var n int64
	for _, a := range cl.Masters(context.Background()) {
		c := redis.NewClient(&redis.Options{Addr: a})
		k, err := c.DBSize(context.Background()).Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	return n - 1
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

// TestRedisResentAfterMarksOnly: a coordinator that wrote every part of a
// batch but died before advancing the isolate's high-water mark leaves
// only the marks in the buckets (a batch with counted keys, fw and sw,
// and read-merge-write ones, tb and sfw: the two kinds of marks). The
// batch resent to another coordinator is answered, and neither its
// counters nor its token bucket nor its strict count is applied twice;
// the isolate's next batch is counted.
func TestRedisResentAfterMarksOnly(t *testing.T) {
	rs := openTestRedis(t, redisstore.Options{})
	clk := &fakeClock{}
	clk.set(t0 + sec/2) // window 1000 of the 1 s limiters
	open := func(s merge.Store) *Coordinator {
		c, err := Open(Options{Store: s, Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := open(rs), open(openRedisNoFlush(t))
	var es []wire.Delta
	for i := 0; i < 24; i++ { // spread over buckets
		es = append(es, wire.Delta{Limiter: "fw", Key: fmt.Sprintf("k%d", i), Window: 1000, Delta: 1},
			wire.Delta{Limiter: "sw", Key: fmt.Sprintf("k%d", i), Window: 1000, Delta: 2})
	}
	es = append(es, wire.Delta{Limiter: "tb", Key: "t", Delta: 5}, wire.Delta{Limiter: "sfw", Key: "s", Window: 1000, Delta: 0, Demand: 3})
	first := batch("a", 1, clk.now(), es...)
	mustSync(t, a, first)
	tat := getKey(t, a, "tb", "t").TAT
	// The coordinator "died" before advancing the high-water mark.
	if err := rs.Client().Del(context.Background(), rs.RedisKey([]byte(merge.HWMStorageKey("a")))).Err(); err != nil {
		t.Fatal(err)
	}
	rp := mustSync(t, b, batch("a", 1, clk.now(), es...))
	if v := viewOf(t, rp, "fw", "k3"); v.Count != 1 {
		t.Fatalf("resent batch's view of fw/k3: count %d, want 1", v.Count)
	}
	for i := 0; i < 24; i++ {
		if ks := getKey(t, b, "fw", fmt.Sprintf("k%d", i)); ks.Count != 1 {
			t.Fatalf("fw/k%d counted %d, want 1 (the resent batch applied twice)", i, ks.Count)
		}
		if ks := getKey(t, b, "sw", fmt.Sprintf("k%d", i)); ks.Count != 2 {
			t.Fatalf("sw/k%d counted %d, want 2", i, ks.Count)
		}
	}
	if got := getKey(t, b, "tb", "t").TAT; got != tat {
		t.Fatalf("token bucket TAT %d after the resend, %d before: charged twice", got, tat)
	}
	if st := b.mergeStats(); st.DeltasApplied != 0 {
		t.Fatalf("the resent batch applied %d deltas", st.DeltasApplied)
	}
	mustSync(t, b, batch("a", 2, clk.now(), wire.Delta{Limiter: "fw", Key: "k3", Window: 1000, Delta: 1}))
	if ks := getKey(t, a, "fw", "k3"); ks.Count != 2 {
		t.Fatalf("fw/k3 after the next batch: %d, want 2", ks.Count)
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
// minute), and so the isolate's mark in that bucket (merge/sharedmarks.go);
// the isolate's high-water mark after IsolateTTL, and its mark in a
// bucket it charged a token bucket in after an hour.
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
	mustSync(t, c, batch("b", 1, clk.now(), wire.Delta{Limiter: "tb", Key: "k", Delta: 1}))
	ctx := context.Background()
	pttl := func(k string) time.Duration {
		t.Helper()
		ttl, err := rs.Client().PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		return ttl
	}
	skey := []byte(merge.KeyStorageKey("fw", "k"))
	// Useful until window 1002 begins (t0 + 2 s): 1.5 s from now, + 1 s + 1 min.
	want := 62500 * time.Millisecond
	for _, k := range []string{rs.RedisKey(skey), rs.Tag(rs.Bucket(skey)) + "na"} {
		if ttl := pttl(k); ttl <= 0 || ttl > want || ttl < want-5*time.Second {
			t.Fatalf("%q TTL %v, want about %v", k, ttl, want)
		}
	}
	for _, k := range []string{rs.RedisKey([]byte(merge.HWMStorageKey("a"))), rs.RedisKey([]byte(merge.HWMStorageKey("b")))} {
		if ttl := pttl(k); ttl < 23*time.Hour || ttl > 24*time.Hour {
			t.Fatalf("%q TTL %v, want IsolateTTL (24h)", k, ttl)
		}
	}
	// The mark of a part that charged a token bucket: an hour (a retry's
	// horizon; a day before, held by every isolate a token made up).
	tkey := []byte(merge.KeyStorageKey("tb", "k"))
	if k := rs.Tag(rs.Bucket(tkey)) + "mb"; pttl(k) < 59*time.Minute || pttl(k) > time.Hour {
		t.Fatalf("%q TTL %v, want an hour", k, pttl(k))
	}
}

// TestRedisSettingsStored: the first store to open a cluster records its
// bucket count and format version there; a store with another bucket
// count, or a cluster in another format, is refused with both values
// named (format 1 is upgraded in place, with the same bucket count); a
// cluster holding keys but no settings is adopted only with an explicit
// bucket count.
func TestRedisSettingsStored(t *testing.T) {
	cl := testCluster(t)
	ctx := context.Background()
	openTestRedis(t, redisstore.Options{Buckets: 16}).Close()
	open := func(buckets int) error {
		s, err := redisstore.Open(ctx, redisstore.Options{Addrs: cl.Addrs(), Buckets: buckets})
		if err == nil {
			s.Close()
		}
		return err
	}
	if err := open(16); err != nil {
		t.Fatalf("same bucket count refused: %v", err)
	}
	for _, tc := range []struct {
		buckets int
		want    []string
	}{{32, []string{"16 buckets", "has 32"}}, {0, []string{"16 buckets", fmt.Sprintf("has %d", redisstore.DefaultBuckets)}}} {
		err := open(tc.buckets)
		if err == nil {
			t.Fatalf("%d buckets accepted on a cluster set up with 16", tc.buckets)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) || !strings.HasPrefix(err.Error(), "redisstore: ") {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
	}
	// Another format version.
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer c.Close()
	if err := c.HSet(ctx, "el:meta", "format", "99").Err(); err != nil {
		t.Fatal(err)
	}
	if err := open(16); err == nil || !strings.Contains(err.Error(), "format 99") || !strings.Contains(err.Error(), fmt.Sprintf("format %d", redisstore.FormatVersion)) {
		t.Errorf("format 99 in the cluster: %v", err)
	}
	// Both differ: both are named (the format alone was).
	if err := open(32); err == nil || !strings.Contains(err.Error(), "format 99") || !strings.Contains(err.Error(), "16 buckets") {
		t.Errorf("format 99 and 16 buckets in the cluster, a store of 32: %v; want both named", err)
	}
	// Format 1 (before counter records) is upgraded in place, with the
	// same bucket count only.
	if err := c.HSet(ctx, "el:meta", "format", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := open(32); err == nil {
		t.Error("a format-1 cluster of 16 buckets upgraded by a store of 32")
	}
	if f, _ := c.HGet(ctx, "el:meta", "format").Result(); f != "1" {
		t.Errorf("format %q after a refused upgrade, want 1", f)
	}
	if err := open(16); err != nil {
		t.Errorf("format 1 not upgraded: %v", err)
	}
	if f, _ := c.HGet(ctx, "el:meta", "format").Result(); f != fmt.Sprint(redisstore.FormatVersion) {
		t.Errorf("format %q after the upgrade, want %d", f, redisstore.FormatVersion)
	}
	// Format 2 (before the sliding windows' section of key records) too.
	if err := c.HSet(ctx, "el:meta", "format", "2").Err(); err != nil {
		t.Fatal(err)
	}
	if err := open(16); err != nil {
		t.Errorf("format 2 not upgraded: %v", err)
	}
	if f, _ := c.HGet(ctx, "el:meta", "format").Result(); f != fmt.Sprint(redisstore.FormatVersion) {
		t.Errorf("format %q after the upgrade from 2, want %d", f, redisstore.FormatVersion)
	}
	// Format 3 (before the sections of what a grant was for and of the
	// requests' cost) too.
	if err := c.HSet(ctx, "el:meta", "format", "3").Err(); err != nil {
		t.Fatal(err)
	}
	if err := open(16); err != nil {
		t.Errorf("format 3 not upgraded: %v", err)
	}
	if f, _ := c.HGet(ctx, "el:meta", "format").Result(); f != fmt.Sprint(redisstore.FormatVersion) {
		t.Errorf("format %q after the upgrade from 3, want %d", f, redisstore.FormatVersion)
	}
	// Keys but no settings (state from before they were stored): the
	// default is refused, an explicit count adopts it.
	if err := cl.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "{el:3}kx", "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := open(0); err == nil || !strings.Contains(err.Error(), "--redis-buckets") {
		t.Errorf("a cluster with keys and no settings opened with the default: %v", err)
	}
	if err := open(64); err != nil {
		t.Errorf("explicit 64 refused: %v", err)
	}
	if err := open(64); err != nil {
		t.Errorf("64 again refused: %v", err)
	}
}

// TestRedisSettingsLostWhileRunning: Redis loses its settings (restarted
// empty, flushed) under a running coordinator of 16 buckets, and another
// starts with 32. Either the running one stored its settings again first
// and the new one is refused, naming both counts, or the new one stored
// its own and the running one refuses to write within a couple of
// seconds, naming both: before, both wrote, and a key's count split in
// two (400 admitted of a strict 200).
func TestRedisSettingsLostWhileRunning(t *testing.T) {
	cl := testCluster(t)
	ctx := context.Background()
	rs := openTestRedis(t, redisstore.Options{Buckets: 16})
	clk := &fakeClock{}
	clk.set(t0)
	c, err := Open(Options{Store: rs, Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1, Demand: 1}))
	if err := cl.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	other, err := redisstore.Open(ctx, redisstore.Options{Addrs: cl.Addrs(), Buckets: 32})
	if err != nil {
		if !strings.Contains(err.Error(), "16 buckets") || !strings.Contains(err.Error(), "has 32") {
			t.Fatalf("the second coordinator refused with %v; want both bucket counts named", err)
		}
		t.Log("the running coordinator stored its settings again first")
		return
	}
	defer other.Close()
	deadline := time.Now().Add(3 * time.Second)
	for seq := int64(2); ; seq++ {
		// A new isolate each time (the flush took the isolates' marks).
		_, err := c.Sync(ctx, batch(fmt.Sprint("b", seq), 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1, Demand: 1}))
		if err != nil {
			if !strings.Contains(err.Error(), "32 buckets") || !strings.Contains(err.Error(), "has 16") {
				t.Fatalf("the running coordinator refused with %v; want both bucket counts named", err)
			}
			t.Logf("the running coordinator refused %v after the other stored its settings", time.Until(deadline.Add(-3*time.Second)).Abs())
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the running coordinator of 16 buckets still writes 3 s after another stored 32")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Nor does it write the fleet's control record (limits, pauses): that
	// reached every coordinator.
	if err := c.PauseFleet(ctx, "test", "fw", "", time.Minute, "x"); err == nil || !strings.Contains(err.Error(), "32 buckets") {
		t.Errorf("a pause through the refusing coordinator: %v; want refused, naming the counts", err)
	}
	// The probe says so too (its last result is reused for 250 ms).
	for end := time.Now().Add(time.Second); rs.Probe(ctx) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the probe passes while the settings are another coordinator's")
		}
	}
}

// TestRedisPeriodRaisedRefits: over Redis too, a strict limiter's period
// raised across a restart fits its keys' records to the new period (their
// windows of the old one read as far ahead, and every delta was dropped),
// and counts it.
func TestRedisPeriodRaisedRefits(t *testing.T) {
	rs := openTestRedis(t, redisstore.Options{Buckets: 16})
	const minute, hour = 60 * sec, 3600 * sec
	cfg := func(p int64) wire.Config {
		return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
			{Name: "p", Algorithm: wire.FixedWindow, Limit: 20, Period: p, Mode: wire.Strict},
			{Name: "q", Algorithm: wire.FixedWindow, Limit: 20, Period: p, Mode: wire.Approximate}}}
	}
	clk := &fakeClock{}
	clk.set(t0)
	c, err := Open(Options{Store: rs, Config: cfg(minute), Clock: clock.Func(clk.now), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, batch("a", 1, clk.now(), wire.Delta{Limiter: "p", Key: "u1", Window: t0 / minute, Delta: 10, Demand: 10},
		wire.Delta{Limiter: "q", Key: "u1", Window: t0 / minute, Delta: 10, Demand: 10}))
	c.Close() // (and its store)
	clk.set(t0 + sec)
	rs2, err := redisstore.Open(context.Background(), redisstore.Options{Addrs: testCluster(t).Addrs(), Buckets: 16})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Open(Options{Store: rs2, Config: cfg(hour), Clock: clock.Func(clk.now), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	mustSync(t, c2, batch("b", 1, clk.now(), wire.Delta{Limiter: "p", Key: "u1", Window: clk.now() / hour, Delta: 5, Demand: 5},
		wire.Delta{Limiter: "q", Key: "u1", Window: clk.now() / hour, Delta: 5, Demand: 5}))
	// p's key record (merge's refit) and q's counter record (the count
	// script) alike.
	for _, lim := range []string{"p", "q"} {
		ks, err := c2.KeyState(context.Background(), lim, "u1")
		if err != nil {
			t.Fatal(err)
		}
		if ks.Window != clk.now()/hour || ks.Count != 5 {
			t.Errorf("%s, 1 m raised to 1 h over Redis: window %d, count %d; want %d and 5", lim, ks.Window, ks.Count, clk.now()/hour)
		}
	}
	// p's refit is counted (records_refit_total): the shared merge's
	// counters of its records were dropped with each bucket's Merger.
	if n := c2.mergeStats().RecordsRefit; n != 1 {
		t.Errorf("%d records refit counted, want p's 1", n)
	}
}

// TestRedisFastClockDropsNoOthersCounts: over Redis, where approximate
// windowed keys are counted in place by a script, an entry for the next
// window (a fast clock) does not make the others' late reports of the
// window before the coordinator's current one stale: they are counted
// there a window late (merge.TestFastClockDropsNoOthersCounts for the
// merge's own path).
func TestRedisFastClockDropsNoOthersCounts(t *testing.T) {
	rs := openTestRedis(t, redisstore.Options{Buckets: 16})
	clk := &fakeClock{}
	clk.set(t0 + sec + sec/100) // 10 ms into window 1001 of the 1 s limiters
	c, err := Open(Options{Store: rs, Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, lim := range []string{"fw", "sfw"} {
		mustSync(t, c, batch("fast-"+lim, 1, clk.now(), wire.Delta{Limiter: lim, Key: "k", Window: 1002, Delta: 1, Demand: 1}))
		for i := int64(0); i < 10; i++ {
			mustSync(t, c, batch("honest-"+lim, 1+i, t0+sec-sec/100, wire.Delta{Limiter: lim, Key: "k", Window: 1000, Delta: 5, Demand: 5}))
		}
		ks, err := c.KeyState(context.Background(), lim, "k")
		if err != nil {
			t.Fatal(err)
		}
		if ks.Window != 1002 || ks.Count != 1 || ks.Prev != 50 {
			t.Errorf("%s: window %d counts %d, the one before %d; want 1002, 1, and the honest isolate's 50 of window 1000 (a window late)", lim, ks.Window, ks.Count, ks.Prev)
		}
	}
}

// TestRedisAheadEntryKeepsSlidingPrev: over Redis (approximate sliding
// keys counted in place), an entry for the next window is counted in the
// coordinator's current one, and the key keeps the previous window's
// count, which a sliding window weighs (merge.TestAheadEntryKeepsSlidingPrev
// for the merge's own path).
func TestRedisAheadEntryKeepsSlidingPrev(t *testing.T) {
	rs := openTestRedis(t, redisstore.Options{Buckets: 16})
	clk := &fakeClock{}
	clk.set(t0 + sec/2) // window 1000
	c, err := Open(Options{Store: rs, Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustSync(t, c, batch("honest", 1, clk.now(), wire.Delta{Limiter: "sw", Key: "k", Window: 1000, Delta: 100, Demand: 100}))
	clk.set(t0 + sec + sec/50) // 20 ms into window 1001
	mustSync(t, c, batch("fast", 1, clk.now(), wire.Delta{Limiter: "sw", Key: "k", Window: 1002, Delta: 3, Demand: 3}))
	v := viewOf(t, mustSync(t, c, batch("honest", 2, clk.now(), wire.Delta{Limiter: "sw", Key: "k", Window: 1001, Demand: 1})), "sw", "k")
	if v.Window != 1001 || v.Count != 3 || v.Prev != 100 {
		t.Errorf("the honest isolate's view after an entry for the next window: window %d, count %d, prev %d; want 1001, 3 (the fast clock's, counted now), 100", v.Window, v.Count, v.Prev)
	}
}
