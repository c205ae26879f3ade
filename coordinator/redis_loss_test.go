package coordinator

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/internal/loadgen"
	"github.com/edgelimit/edgelimit/internal/rediscluster"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestRedisFailoverLossMeasured measures what a master failure loses of
// acknowledged deltas, without and with WAIT: a coordinator over a Redis
// Cluster of 3 masters and 3 replicas takes batches as fast as 64 clients
// send them (100 deltas over 10,000 keys of a 1-hour window); 2 s in, the
// replica of one master is frozen (SIGSTOP) and cut off (CLIENT KILL TYPE
// replica), as a replica falling behind; 300 ms later the master is killed
// with SIGKILL as the replica resumes, and the replica takes over (the old
// master is restarted as a replica once it has): what the master
// acknowledged in those 300 ms never reached the replica. Afterwards the stored counts are
// summed and compared with the deltas the coordinator acknowledged. A
// measurement (run with EDGELIMIT_REDIS_LOSS=1, the figures are logged):
// with WAIT 1 nothing acknowledged may be missing, which it checks.
func TestRedisFailoverLossMeasured(t *testing.T) {
	if os.Getenv("EDGELIMIT_REDIS_LOSS") == "" {
		t.Skip("a measurement: set EDGELIMIT_REDIS_LOSS=1 to run it")
	}
	if err := rediscluster.Available(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	for _, wait := range []int{0, 1} {
		t.Run(fmt.Sprintf("wait=%d", wait), func(t *testing.T) { measureLoss(t, wait) })
	}
}

func measureLoss(t *testing.T, wait int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := rediscluster.Start(ctx, rediscluster.Options{Masters: 3, ReplicasPerMaster: 1, AppendFsync: "everysec"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	rs, err := redisstore.Open(ctx, redisstore.Options{Addrs: cl.Addrs(), Wait: wait, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "total", Algorithm: wire.FixedWindow, Limit: wire.MaxLimit, Period: int64(time.Hour)}}}
	c, err := Open(Options{Store: rs, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go c.Serve(sctx, ln)
	const keys = 10000
	go func() {
		time.Sleep(2 * time.Second)
		m := cl.Masters(ctx)
		r := cl.ReplicaOf(ctx, m[0])
		cl.Signal(r, syscall.SIGSTOP)
		cl.DisconnectReplicas(ctx, m[0])
		time.Sleep(300 * time.Millisecond)
		cl.Kill(m[0])
		cl.Signal(r, syscall.SIGCONT)
		if err := cl.WaitPromoted(ctx, r, 30*time.Second); err != nil {
			t.Error(err)
			return
		}
		cl.Restart(ctx, m[0])
	}()
	res, err := loadgen.Run(ctx, loadgen.Config{URL: "http://" + ln.Addr().String(), Clients: 64, Entries: 100,
		Keys: keys, Limiter: "total", Period: int64(time.Hour), Duration: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitOK(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	var ks [][]byte
	for i := 0; i < keys; i++ {
		ks = append(ks, []byte(merge.KeyStorageKey("total", fmt.Sprintf("key-%d", i))))
	}
	var vals []merge.Versioned
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if vals, _, _, err = rs.ReadShared(ctx, ks, nil, nil); err == nil || time.Now().After(deadline) {
			break
		}
	}
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
	// Written: the deltas of the batches whose writes Redis acknowledged
	// (the coordinator answered 200, or would have but the client had
	// stopped waiting).
	written := c.mergeStats().DeltasApplied
	t.Logf("WAIT %d: %d key-deltas acknowledged to clients (%d syncs, %d failed), %d written, %d stored: %d written and missing",
		wait, res.KeyDeltas, res.Syncs, res.Errors, written, stored, max(written-stored, 0))
	if wait > 0 && stored < written {
		t.Errorf("with WAIT %d, %d acknowledged deltas were lost", wait, written-stored)
	}
}
