package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/internal/loadgen"
	"github.com/edgelimit/edgelimit/internal/rediscluster"
	"github.com/edgelimit/edgelimit/wasm/wire"
	"github.com/redis/go-redis/v9"
)

// totalConfig is one fixed-window limiter "total" of an hour that never
// denies: its count is the number of deltas stored.
func totalConfig() wire.Config {
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "total", Algorithm: wire.FixedWindow, Limit: wire.MaxLimit, Period: int64(time.Hour)}}}
}

// serveShared runs a coordinator over rs on a loopback port until the test
// ends and returns its base URL.
func serveShared(t *testing.T, rs *redisstore.Store, cfg wire.Config) (*Coordinator, string) {
	t.Helper()
	c, err := Open(Options{Store: rs, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Serve(ctx, ln)
	}()
	t.Cleanup(func() {
		stop()
		<-done
		c.Close()
	})
	return c, "http://" + ln.Addr().String()
}

// storedTotal sums the stored counts of the keys key-0 .. key-(n-1) of
// the limiter of cfg (its only one), as loadgen names them.
func storedTotal(t *testing.T, rs *redisstore.Store, cfg wire.Config, n int) int64 {
	t.Helper()
	var ks [][]byte
	for i := 0; i < n; i++ {
		ks = append(ks, []byte(merge.KeyStorageKey(cfg.Limiters[0].Name, fmt.Sprintf("key-%d", i))))
	}
	vals, _, _, err := rs.ReadShared(context.Background(), ks, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	for i, v := range vals {
		count, prev, err := merge.SharedCounts(&cfg.Limiters[0], string(ks[i]), v)
		if err != nil {
			t.Fatal(err)
		}
		stored += count + prev
	}
	return stored
}

// healthWatch polls url's /healthz every 20 ms and records the first 503
// and the first 200 after it.
type healthWatch struct {
	mu           sync.Mutex
	down, upWant time.Time
}

func watchHealth(ctx context.Context, url string) *healthWatch {
	h := &healthWatch{}
	go func() {
		client := &http.Client{Timeout: 2 * time.Second}
		for ctx.Err() == nil {
			resp, err := client.Get(url + "/healthz")
			now := time.Now()
			if err == nil {
				resp.Body.Close()
				h.mu.Lock()
				switch {
				case resp.StatusCode != 200 && h.down.IsZero():
					h.down = now
				case resp.StatusCode == 200 && !h.down.IsZero() && h.upWant.IsZero():
					h.upWant = now
				}
				h.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return h
}

func (h *healthWatch) times() (down, up time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down, h.upWant
}

// TestRedisFailoverTimeline kills a Redis master under load and prints the
// recovery: a Redis Cluster of 3 masters with 2 replicas each
// (cluster-node-timeout 1000), a coordinator with WAIT 1, 8 clients
// posting batches of 24 deltas over 256 keys (each batch touches every
// master) and resending a failed batch as an isolate does. 1.5 s in, one
// master is killed (SIGKILL). It logs the timeline (promotion of a
// replica, first admission after it, when every client was admitted
// again, /healthz down and up) and checks that nothing acknowledged was
// lost (the stored count is at least the acknowledged deltas), nothing
// was counted twice (at most what the clients sent), that admissions
// resumed after the promotion, /healthz reported the outage and recovered,
// and the store counted the failover. docs/scale-out.md quotes its
// timeline (`go test -v -run TestRedisFailoverTimeline ./coordinator/`).
func TestRedisFailoverTimeline(t *testing.T) {
	ctx, cl := startReplicatedCluster(t, rediscluster.Options{Masters: 3, ReplicasPerMaster: 2, NodeTimeout: time.Second})
	logs := &syncBuffer{}
	rs, err := redisstore.Open(ctx, redisstore.Options{Addrs: cl.Addrs(), Wait: 1, Buckets: 32,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cfg := totalConfig()
	_, url := serveShared(t, rs, cfg)
	hw := watchHealth(ctx, url)

	const clients, entries, keys = 8, 24, 256
	var mu sync.Mutex
	var acks []time.Time
	perClient := make([][]time.Time, clients)
	acked := func(c int, at time.Time) {
		mu.Lock()
		acks = append(acks, at)
		perClient[c] = append(perClient[c], at)
		mu.Unlock()
	}
	var killed, promoted time.Time
	var replicas []string
	var victim string
	// The load runs until 4 s after the promotion: Redis's own election
	// takes 2-3 s with a 1 s node timeout here, longer on a loaded machine
	// (a fixed 7 s run once ended before it), so the run waits for it, up
	// to 30 s.
	loadCtx, endLoad := context.WithCancel(ctx)
	defer endLoad()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		defer func() {
			if !promoted.IsZero() {
				time.Sleep(4 * time.Second)
			}
			endLoad()
		}()
		time.Sleep(1500 * time.Millisecond)
		m := cl.Masters(ctx)
		victim = m[0]
		replicas = cl.ReplicasOf(ctx, victim)
		killed = time.Now()
		cl.Kill(victim)
		for loadCtx.Err() == nil {
			for _, r := range replicas {
				if cl.IsMaster(ctx, r) {
					promoted = time.Now()
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	res, err := loadgen.Run(loadCtx, loadgen.Config{URL: url, Clients: clients, Entries: entries, Keys: keys,
		Limiter: "total", Period: int64(time.Hour), Duration: 30 * time.Second, Acked: acked})
	if err != nil {
		t.Fatal(err)
	}
	<-watched
	if promoted.IsZero() {
		t.Fatalf("no replica of %s (%v) was promoted within the run", victim, replicas)
	}
	mu.Lock()
	sort.Slice(acks, func(i, j int) bool { return acks[i].Before(acks[j]) })
	var lastBefore, firstAfter time.Time
	for _, a := range acks {
		if a.Before(killed) {
			lastBefore = a
		}
		if a.After(promoted) && firstAfter.IsZero() {
			firstAfter = a
		}
	}
	// allBack: when the last client had a batch acknowledged after the
	// promotion (zero if one never had).
	var allBack time.Time
	for _, ts := range perClient {
		i := sort.Search(len(ts), func(i int) bool { return ts[i].After(promoted) })
		if i == len(ts) {
			allBack = time.Time{}
			break
		}
		if ts[i].After(allBack) {
			allBack = ts[i]
		}
	}
	mu.Unlock()
	if firstAfter.IsZero() {
		t.Fatalf("no batch acknowledged after the promotion at +%s", promoted.Sub(killed))
	}
	down, up := hw.times()
	ms := func(at time.Time) string {
		if at.IsZero() {
			return "never"
		}
		return fmt.Sprintf("%+.2f s", at.Sub(killed).Seconds())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "failure timeline (kill -9 of master %s at 0):\n", victim)
	fmt.Fprintf(&b, "| event | time |\n|---|---|\n")
	fmt.Fprintf(&b, "| last batch acknowledged before the kill | %s |\n", ms(lastBefore))
	fmt.Fprintf(&b, "| /healthz 503 | %s |\n", ms(down))
	fmt.Fprintf(&b, "| a replica reports role:master | %s |\n", ms(promoted))
	fmt.Fprintf(&b, "| first batch acknowledged after the promotion | %s (%.0f ms after it) |\n", ms(firstAfter), firstAfter.Sub(promoted).Seconds()*1000)
	fmt.Fprintf(&b, "| every client's batches acknowledged again | %s |\n", ms(allBack))
	fmt.Fprintf(&b, "| /healthz 200 again | %s |\n", ms(up))
	t.Log(b.String())
	st := rs.Stats()
	t.Logf("load: %s; store: %d round trips, %d errors, %d retries, %d outages, %d slot reloads, %d failovers seen, %d WAIT shortfalls",
		res, st.RoundTrips, st.Errors, st.Retries, st.Outages, st.SlotReloads, st.Failovers, st.WaitShortfalls)

	if err := cl.WaitOK(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	stored := storedTotal(t, rs, cfg, keys)
	t.Logf("%d key-deltas acknowledged, %d stored", res.KeyDeltas, stored)
	if stored < res.KeyDeltas {
		t.Errorf("with WAIT 1 and 2 replicas, %d acknowledged deltas were lost", res.KeyDeltas-stored)
	}
	// At most each client's last batch, sent but not acknowledged when the
	// run ended, is stored beyond what was acknowledged.
	if stored > res.KeyDeltas+clients*entries {
		t.Errorf("%d stored > %d acknowledged + %d in flight: a batch was counted twice", stored, res.KeyDeltas, clients*entries)
	}
	if allBack.IsZero() {
		t.Errorf("a client had no batch acknowledged after the promotion")
	}
	if down.IsZero() || up.IsZero() {
		t.Errorf("/healthz went down at %s and up at %s: it should report the outage and its end", ms(down), ms(up))
	}
	if st.Retries == 0 || st.Outages == 0 || st.SlotReloads == 0 || st.Failovers == 0 {
		t.Errorf("the store counted %+v: want retries, an outage, slot reloads and a failover", st)
	}
	// Logged once for the master's failure and once at its end, not per
	// failed attempt (nor per answer of the other masters between them).
	text := logs.String()
	nDown, nBack := int64(strings.Count(text, "Redis unavailable")), int64(strings.Count(text, "Redis answers again"))
	if nDown != 1 || st.Outages != 1 || nBack > 1 || nDown >= st.Errors {
		t.Errorf("%d outage logs and %d recovery logs for %d outages and %d failed round trips:\n%s", nDown, nBack, st.Outages, st.Errors, text)
	}
	// The counters are on /metrics.
	m := metricsText(t, url)
	for _, name := range []string{"edgelimit_coordinator_redis_retries_total", "edgelimit_coordinator_redis_outages_total",
		"edgelimit_coordinator_redis_round_trips_total", "edgelimit_coordinator_redis_failovers_total"} {
		var v float64
		i := strings.Index(m, "\n"+name+" ")
		if i < 0 {
			t.Errorf("/metrics has no %s", name)
			continue
		}
		fmt.Sscan(m[i+len(name)+2:], &v)
		if v == 0 {
			t.Errorf("/metrics: %s is 0", name)
		}
	}
}

// postBatch sends b to url's POST /v1/sync and returns the status (and
// logs the body of an error).
func postBatch(t *testing.T, url string, b *wire.Batch) int {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Post(url+"/v1/sync", "application/msgpack", bytes.NewReader(b.AppendMsg(nil)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Logf("batch %s/%d: %d %s", b.Isolate, b.Seq, resp.StatusCode, body)
	}
	return resp.StatusCode
}

// TestRedisWaitOneReplica: with one replica per master and WAIT 1, a
// master's failure leaves its promoted replica without a replica, so WAIT
// cannot be met. Two coordinators over one cluster show both choices: A
// (the default, refusal) answers 503 and /healthz 503 until the old master
// is back as a replica, then takes the same batch; B
// (--redis-wait-degraded) keeps answering 200 with /healthz 200, counting
// the WAIT shortfalls. Every acknowledged delta is stored once.
func TestRedisWaitOneReplica(t *testing.T) {
	ctx, cl := startReplicatedCluster(t, rediscluster.Options{Masters: 3, ReplicasPerMaster: 1, NodeTimeout: time.Second})
	open := func(degraded bool) *redisstore.Store {
		retryFor := time.Second // refusal answers 503 after 1 s of WAITs
		if degraded {
			retryFor = 0 // the default, 3 s: room for the read after the failover and the first WAIT (1 s)
		}
		rs, err := redisstore.Open(ctx, redisstore.Options{Addrs: cl.Addrs(), Wait: 1, Buckets: 32,
			WaitDegraded: degraded, RetryFor: retryFor})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	rsA, rsB := open(false), open(true)
	cfg := totalConfig()
	_, urlA := serveShared(t, rsA, cfg)
	_, urlB := serveShared(t, rsB, cfg)
	const keys = 256
	batch := func(iso string, seq int64) *wire.Batch {
		b := &wire.Batch{Version: wire.Version, Isolate: iso, Seq: seq, At: time.Now().UnixNano()}
		for i := 0; i < keys; i++ {
			b.Entries = append(b.Entries, wire.Delta{Limiter: "total", Key: fmt.Sprintf("key-%d", i),
				Window: time.Now().UnixNano() / int64(time.Hour), Delta: 1, Demand: 1})
		}
		return b
	}
	var acked int64
	mustPost := func(url string, b *wire.Batch) {
		t.Helper()
		if st := postBatch(t, url, b); st != 200 {
			t.Fatalf("batch %s/%d: status %d", b.Isolate, b.Seq, st)
		}
		acked += int64(len(b.Entries))
	}
	mustPost(urlA, batch("a", 1))
	mustPost(urlB, batch("b", 1))
	waitHealth(t, urlA, 200)
	waitHealth(t, urlB, 200)

	victim := cl.Masters(ctx)[0]
	replica := cl.ReplicaOf(ctx, victim)
	t.Logf("kill -9 master %s (replica %s)", victim, replica)
	if err := cl.Kill(victim); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitPromoted(ctx, replica, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// Degraded: served, with the shortfall counted.
	mustPost(urlB, batch("b", 2))
	waitHealth(t, urlB, 200)
	if st := rsB.Stats(); st.WaitDegraded == 0 {
		t.Errorf("degraded store counted no WAIT shortfall: %+v", st)
	}
	// Refusal: 503 (the batch is not acknowledged), /healthz 503.
	a2 := batch("a", 2)
	if st := postBatch(t, urlA, a2); st != http.StatusServiceUnavailable {
		t.Fatalf("refusing coordinator answered %d while WAIT cannot be met, want 503", st)
	}
	waitHealth(t, urlA, http.StatusServiceUnavailable)
	if st := rsA.Stats(); st.WaitShortfalls == 0 || st.WaitDegraded != 0 {
		t.Errorf("refusing store: %+v, want shortfalls and none accepted", st)
	}
	// The old master comes back as the new master's replica: A serves the
	// same batch again (resent as an isolate does).
	t.Logf("restart %s", victim)
	if err := cl.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitReplicas(ctx, 1, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, urlA, 200)
	mustPost(urlA, a2)
	mustPost(urlA, batch("a", 3))

	if err := cl.WaitOK(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if stored := storedTotal(t, rsA, cfg, keys); stored != acked {
		t.Errorf("%d deltas acknowledged, %d stored", acked, stored)
	}
}

// TestRedisRetryConfirmedByWait: a batch whose write reached a master but
// not its replica (WAIT not met: 503) is resent; the retry finds the
// bucket's mark already at its seq and must not be acknowledged before
// the replica has that earlier write. 3 masters with one replica each,
// WAIT 1 (refusal, 1 s): the key's master's replica is frozen (SIGSTOP),
// the batch answers 503, its retry 503 too (the mark is renewed, and WAIT
// after it is not met), and once the replica runs again the retry is
// acknowledged and counted once. The isolate's high-water mark lives on
// another master, whose WAIT is met: only the bucket's confirmation can
// refuse the retry.
func TestRedisRetryConfirmedByWait(t *testing.T) {
	ctx, cl := startReplicatedCluster(t, rediscluster.Options{Masters: 3, ReplicasPerMaster: 1})
	rs, err := redisstore.Open(ctx, redisstore.Options{Addrs: cl.Addrs(), Wait: 1, Buckets: 32, RetryFor: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := totalConfig()
	c, url := serveShared(t, rs, cfg)
	skey := []byte(merge.KeyStorageKey("total", "key-0"))
	master := masterOf(ctx, t, rs, skey)
	iso := ""
	for i := 0; iso == ""; i++ {
		if id := fmt.Sprintf("iso-%d", i); masterOf(ctx, t, rs, []byte(merge.HWMStorageKey(id))) != master {
			iso = id
		}
	}
	replica := cl.ReplicaOf(ctx, master)
	b := oneDelta(iso, 1)
	if err := cl.Signal(replica, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			cl.Signal(replica, syscall.SIGCONT)
		}
	}()
	if st := postBatch(t, url, b); st != http.StatusServiceUnavailable {
		t.Fatalf("batch with its master's replica frozen: %d, want 503", st)
	}
	if st := postBatch(t, url, b); st != http.StatusServiceUnavailable {
		t.Fatalf("its retry, replica still frozen: %d, want 503 (acknowledged before the replica had it)", st)
	}
	cl.Signal(replica, syscall.SIGCONT)
	stopped = false
	for deadline := time.Now().Add(20 * time.Second); postBatch(t, url, b) != 200; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the retry was never acknowledged after the replica resumed")
		}
	}
	if n := countOf(t, c); n != 1 {
		t.Fatalf("count %d, want 1", n)
	}
}

// masterOf returns the address of the master that holds the record of
// the storage key skey in rs's cluster (as rs's slot map has it).
func masterOf(ctx context.Context, t *testing.T, rs *redisstore.Store, skey []byte) string {
	t.Helper()
	n, err := rs.Client().(*redis.ClusterClient).MasterForKey(ctx, rs.RedisKey(skey))
	if err != nil {
		t.Fatal(err)
	}
	return n.Options().Addr
}

// startReplicatedCluster starts a Redis Cluster with o for a test of
// failures (skipped in -short, or without redis-server) and stops it when
// the test ends; ctx bounds the test's Redis work (90 s).
func startReplicatedCluster(t *testing.T, o rediscluster.Options) (context.Context, *rediscluster.Cluster) {
	t.Helper()
	if testing.Short() {
		t.Skip("a Redis Cluster with replicas; not in -short")
	}
	if err := rediscluster.Available(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	cl, err := rediscluster.Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	return ctx, cl
}

// TestRedisProbeNamesTheFrozenMaster: with one master of three frozen
// (SIGSTOP) past the cluster's node timeout, the others answer that the
// cluster is not ok at once while the frozen one's probe waits out its
// deadline: the health probe named a master that answered (2 of 3 runs in
// an operator's run-through), and took the cluster's word for a refusal,
// not an outage. It names the frozen master now, as an outage.
func TestRedisProbeNamesTheFrozenMaster(t *testing.T) {
	ctx, cl := startReplicatedCluster(t, rediscluster.Options{Masters: 3})
	// A timeout the healthy masters answer within on a loaded machine
	// (at 500 ms a loaded CI timed one of them out too, and named it).
	rs, err := redisstore.Open(ctx, redisstore.Options{Addrs: cl.Addrs(), Buckets: 32, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	frozen := cl.Masters(ctx)[1]
	if err := cl.Signal(frozen, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer cl.Signal(frozen, syscall.SIGCONT)
	time.Sleep(2500 * time.Millisecond) // past the node timeout (1 s): the others mark it failed
	var perr error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if perr = rs.Probe(ctx); perr != nil || time.Now().After(deadline) {
			break
		}
	}
	if perr == nil || !strings.Contains(perr.Error(), frozen) {
		t.Fatalf("probe with %s frozen: %v; want it named", frozen, perr)
	}
}
