package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

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
const aclRules = "~el:* ~{el:* +@read +@write +@scripting +@connection +wait +info +dbsize +scan +cluster|slots +cluster|shards +cluster|info"

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
		{"redis://edgelimit:s3cret@" + srv.Addr, "redisstore: "},
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
	rs, err := openURL(ctx, "redis://"+sentinel.Addr+"?sentinel=el", func(o *redisstore.Options) {
		o.Wait, o.WaitDegraded = 1, true
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
