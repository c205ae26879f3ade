package coordinator

import (
	"context"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/history"
	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/internal/rediscluster"
	"github.com/edgelimit/edgelimit/internal/selfsigned"
	"github.com/edgelimit/edgelimit/wasm/wire"
	"github.com/redis/go-redis/v9"
)

// openURL opens a store from a store URL as the coordinator's command
// does (ParseURL, then Open).
func openURL(ctx context.Context, u string, mod func(*redisstore.Options)) (*redisstore.Store, error) {
	o, err := redisstore.ParseURL(u)
	if err != nil {
		return nil, err
	}
	if mod != nil {
		mod(&o)
	}
	return redisstore.Open(ctx, o)
}

// countOf syncs nothing and returns the stored count of total/key-0 as the
// coordinator's admin API reads it.
func countOf(t *testing.T, c *Coordinator) int64 {
	t.Helper()
	ks, err := c.KeyState(context.Background(), "total", "key-0")
	if err != nil {
		t.Fatal(err)
	}
	return ks.Count
}

// oneDelta is batch seq of isolate iso: one delta on total/key-0.
func oneDelta(iso string, seq int64) *wire.Batch {
	now := time.Now().UnixNano()
	return &wire.Batch{Version: wire.Version, Isolate: iso, Seq: seq, At: now,
		Entries: []wire.Delta{{Limiter: "total", Key: "key-0", Window: now / int64(time.Hour), Delta: 1, Demand: 1}}}
}

// aclRules are the ACL rules docs/scale-out.md gives the coordinators'
// Redis user: its keys, and the commands the store sends.
const aclRules = "~el:* ~{el:* ~{elh:* +@read +@write +@scripting +@connection +multi +exec +wait +info +dbsize +scan +cluster|slots +cluster|shards +cluster|info"

// TestRedisStandaloneTLSACL: one standalone redis-server serving TLS only,
// with an ACL user limited to aclRules and the default user off. rediss://USER:PASSWORD@...
// with ca= the server's certificate opens it (standalone detected) and a
// coordinator counts over it; a wrong password, no CA, or plain redis://
// are refused with an error.
func TestRedisStandaloneTLSACL(t *testing.T) {
	if err := rediscluster.Available(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	cert, err := selfsigned.Write(dir, "redis", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rediscluster.StartServer(ctx, rediscluster.ServerOptions{TLSCert: cert.CertFile, TLSKey: cert.KeyFile,
		Users: []string{"edgelimit on >s3cret " + aclRules}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	for _, bad := range []struct{ url, want string }{
		{"rediss://edgelimit:wrong@" + srv.Addr + "?ca=" + cert.CertFile, "WRONGPASS"},
		{"rediss://edgelimit:s3cret@" + srv.Addr, "certificate"},
		{"redis://edgelimit:s3cret@" + srv.Addr, "use rediss://"},
	} {
		s, err := openURL(ctx, bad.url, func(o *redisstore.Options) { o.Timeout = time.Second })
		if err == nil {
			s.Close()
			t.Errorf("%s opened", bad.url)
			continue
		}
		if !strings.Contains(err.Error(), bad.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v, want %q (and no password)", bad.url, err, bad.want)
		}
	}
	rs, err := openURL(ctx, "rediss://edgelimit:s3cret@"+srv.Addr+"?ca="+cert.CertFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, url := serveShared(t, rs, totalConfig())
	var last *wire.Batch
	for seq := int64(1); seq <= 3; seq++ {
		last = oneDelta("tls", seq)
		if st := postBatch(t, url, last); st != 200 {
			t.Fatalf("batch %d: %d", seq, st)
		}
	}
	if st := postBatch(t, url, last); st != 200 { // a retry: a duplicate, not counted again
		t.Fatalf("retry: %d", st)
	}
	if n := countOf(t, c); n != 3 {
		t.Fatalf("count %d, want 3", n)
	}
	waitHealth(t, url, 200)
	// The history's keys are the user's too (the rules had no {elh:*: every
	// history write failed with NOPERM, quietly, the counts going on).
	pt := []history.Point{{Res: history.Minute, Bucket: history.Minute.Bucket(time.Now().UnixNano()),
		Series: history.Series{Limiter: "total", Key: "key-0"}, Counts: history.Counts{Admitted: 3}}}
	if err := rs.AddHistory("acl", pt); err != nil {
		t.Errorf("history written by the ACL user: %v", err)
	}
	if err := rs.SaveKept("total", []history.Kept{{Key: "key-0"}}, nil); err != nil {
		t.Errorf("kept keys written by the ACL user: %v", err)
	}
	if got, err := rs.ReadHistory(history.Minute, pt[0].Series, pt[0].Bucket, pt[0].Bucket+1); err != nil || len(got) != 1 || got[0].Admitted != 3 {
		t.Errorf("history read by the ACL user: %v, %v; want admitted 3", got, err)
	}
}

// TestRedisSentinel: a master, its replica and a Sentinel watching them
// (quorum 1, down after 1 s). redis://SENTINEL?sentinel=NAME opens the
// master through the Sentinel; a coordinator counts over it with WAIT 1;
// the master is killed, the Sentinel promotes the replica, and the same
// coordinator goes on (its client asks the Sentinel for the new master;
// WAIT 1 degraded: the new master has no replica) with nothing
// acknowledged lost.
func TestRedisSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("a Sentinel failover; not in -short")
	}
	if err := rediscluster.Available(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	master, err := rediscluster.StartServer(ctx, rediscluster.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer master.Stop()
	replica, err := rediscluster.StartServer(ctx, rediscluster.ServerOptions{ReplicaOf: master.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Stop()
	sentinel, err := rediscluster.StartSentinel(ctx, "el", master.Addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sentinel.Stop()
	// A master name no Sentinel knows is said to be the problem (go-redis
	// says every Sentinel is unreachable).
	if s, err := openURL(ctx, "redis://"+sentinel.Addr+"?sentinel=nosuch", func(o *redisstore.Options) { o.Timeout = time.Second }); err == nil {
		s.Close()
		t.Error("a master no Sentinel watches opened")
	} else if !strings.Contains(err.Error(), `master named "nosuch"`) {
		t.Errorf("unknown master name: %v; want the name said to be unknown", err)
	}
	logs := &syncBuffer{}
	rs, err := openURL(ctx, "redis://"+sentinel.Addr+"?sentinel=el", func(o *redisstore.Options) {
		o.Wait, o.WaitDegraded = 1, true
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	if err != nil {
		t.Fatal(err)
	}
	c, url := serveShared(t, rs, totalConfig())
	// WAIT 1 needs the replica online: wait for its first sync.
	mc := redis.NewClient(&redis.Options{Addr: master.Addr})
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info, err := mc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "state=online") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not come online: %v %s", err, info)
		}
	}
	mc.Close()
	if st := postBatch(t, url, oneDelta("s", 1)); st != 200 {
		t.Fatalf("batch 1: %d", st)
	}
	if st := rs.Stats(); st.WaitShortfalls != 0 {
		t.Fatalf("batch 1 was not replicated: %+v", st)
	}
	waitHealth(t, url, 200) // the probe sees the first master
	t.Logf("kill -9 master %s; the Sentinel promotes %s", master.Addr, replica.Addr)
	master.Kill()
	seq := int64(2)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if postBatch(t, url, oneDelta("s", seq)) == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no batch acknowledged after the failover")
		}
	}
	if n := countOf(t, c); n != 2 {
		t.Fatalf("count %d after the failover, want 2", n)
	}
	waitHealth(t, url, 200) // the probe sees the new master
	if st := rs.Stats(); st.Failovers == 0 || st.WaitDegraded == 0 {
		t.Errorf("store counted %+v: want a failover and degraded WAITs", st)
	}
	// go-redis's own line on the new master is one of the store's JSON
	// lines (it wrote plain text to stderr).
	if !strings.Contains(logs.String(), `"msg":"redisstore: go-redis: sentinel: new master`) {
		t.Errorf("go-redis's failover line is not in the store's log:\n%s", logs.String())
	}
}

// TestRedisClusterTLS: a Redis Cluster of 3 masters serving TLS only
// (tls-cluster, tls-replication): rediss://...?ca= the nodes' certificate
// opens it as a cluster (the slot map's addresses are their TLS ports) and
// a coordinator counts over it; plain redis:// is refused.
func TestRedisClusterTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("a TLS cluster; not in -short")
	}
	if err := rediscluster.Available(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cert, err := selfsigned.Write(t.TempDir(), "redis", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := rediscluster.Start(ctx, rediscluster.Options{Masters: 3, TLSCert: cert.CertFile, TLSKey: cert.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	addrs := strings.Join(cl.Addrs(), ",")
	if s, err := openURL(ctx, "redis://"+addrs, func(o *redisstore.Options) { o.Timeout = time.Second }); err == nil {
		s.Close()
		t.Fatal("plain redis:// opened a TLS cluster")
	}
	rs, err := openURL(ctx, "rediss://"+addrs+"?ca="+cert.CertFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Mode() != redisstore.ModeCluster {
		t.Fatalf("mode %q, want cluster", rs.Mode())
	}
	c, url := serveShared(t, rs, totalConfig())
	for seq := int64(1); seq <= 3; seq++ {
		if st := postBatch(t, url, oneDelta("tlsc", seq)); st != 200 {
			t.Fatalf("batch %d: %d", seq, st)
		}
	}
	if n := countOf(t, c); n != 3 {
		t.Fatalf("count %d, want 3", n)
	}
	waitHealth(t, url, 200)
}

// TestRedisRefusingIsNoOutage: a standalone server without the replica
// that --redis-wait 1 needs answers every round trip, and its probe fails:
// /healthz is 503, logged once, and it is no outage (the outage log
// flapped, "unavailable" and "answers again" every 1-2.5 s, as writes
// that succeeded ended each). Then the server hangs (SIGSTOP): the probe
// answers within its timeout, not go-redis's read timeout (5 s past a 2 s
// probe timeout before), and that is an outage.
func TestRedisRefusingIsNoOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startRedisServer(ctx, t)
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	rs, err := openURL(ctx, "redis://"+srv.Addr, func(o *redisstore.Options) {
		o.Wait, o.Logger, o.Timeout, o.WaitTimeout = 1, log, 300*time.Millisecond, 5*time.Second
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for range 6 {
		if err := rs.Probe(ctx); err == nil || !strings.Contains(err.Error(), "WAIT needs 1") {
			t.Fatalf("probe without a replica: %v; want refused for WAIT", err)
		}
		if _, err := rs.LoadKept("total"); err != nil { // a round trip that succeeds
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	text := logs.String()
	if n := rs.Stats().Outages; n != 0 || strings.Contains(text, "Redis unavailable") {
		t.Errorf("%d outages counted while Redis answered every round trip; logs:\n%s", n, text)
	}
	if n := strings.Count(text, "does not serve this coordinator's writes"); n != 1 {
		t.Errorf("the refusal logged %d times, want once; logs:\n%s", n, text)
	}
	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer srv.Signal(syscall.SIGCONT)
	time.Sleep(300 * time.Millisecond) // past the reuse of the last probe
	start := time.Now()
	err = rs.Probe(ctx)
	if took := time.Since(start); err == nil || took > 3*time.Second {
		t.Errorf("probe of a hung server: %v after %v; want an error within the 300 ms timeout (a generous 3 s)", err, took)
	}
	if rs.Stats().Outages != 1 {
		t.Errorf("a hung server counted %d outages, want 1", rs.Stats().Outages)
	}
}

// TestControlPollLogsOnce: a Redis that hangs for a few polls of the
// control record is logged once when the reads fail and once when they
// read again (every poll was logged: 9 lines in 9 s of an outage, besides
// the store's own one line).
func TestControlPollLogsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("a Redis hung for 3.5 s; not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := startRedisServer(ctx, t)
	rs, err := openURL(ctx, "redis://"+srv.Addr, func(o *redisstore.Options) { o.Timeout = 300 * time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	logs := &syncBuffer{}
	c, err := Open(Options{Store: rs, Config: totalConfig(), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := srv.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ControlPoll*3 + ControlPoll/2)
	if err := srv.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "control record reads again") {
		if time.Now().After(deadline) {
			t.Fatalf("no recovery logged 5 s after the server resumed; logs:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"coordinator: control: reading the control record"); n != 1 {
		t.Errorf("%d lines for the failed reads of one outage, want 1; logs:\n%s", n, logs.String())
	}
}

// TestRedisTLSToAPlainPortSaysSo: rediss:// to a plain redis-server's
// port waits for a handshake that never comes, and the error said only
// "context deadline exceeded"; it names the likely cause now (the other
// way round, redis:// to a TLS-only port, in TestRedisStandaloneTLSACL).
func TestRedisTLSToAPlainPortSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := startRedisServer(ctx, t)
	for _, u := range []string{"rediss://" + srv.Addr, "rediss://" + srv.Addr + "?mode=standalone"} {
		s, err := openURL(ctx, u, func(o *redisstore.Options) { o.Timeout = 500 * time.Millisecond })
		if err == nil {
			s.Close()
			t.Fatalf("%s opened a plain server", u)
		}
		if !strings.Contains(err.Error(), "use redis://") {
			t.Errorf("%s: %v; want the hint that the port serves plain Redis", u, err)
		}
	}
}

// startRedisServer starts one plain redis-server for the test (skipped
// where Redis is not installed), stopped when the test ends.
func startRedisServer(ctx context.Context, t *testing.T) *rediscluster.Node {
	t.Helper()
	if err := rediscluster.Available(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	srv, err := rediscluster.StartServer(ctx, rediscluster.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}
