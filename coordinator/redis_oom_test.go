package coordinator

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/internal/rediscluster"
	"github.com/redis/go-redis/v9"
)

// TestRedisOutOfMemoryIsUnhealthy: a Redis at its maxmemory under
// noeviction answers every write OOM. The coordinator over it answers its
// syncs 503, /healthz 503, counts the refusals in its Redis errors and logs
// one line for the outage; once memory is freed, /healthz is 200 and
// syncs are applied again. Before, /healthz stayed 200 through the whole
// outage (the probe asked only whether Redis answered), and nothing was
// counted or logged: load balancers kept sending every sync to a
// coordinator that failed them all.
func TestRedisOutOfMemoryIsUnhealthy(t *testing.T) {
	if err := rediscluster.Available(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := rediscluster.StartServer(ctx, rediscluster.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	logs := &syncBuffer{}
	rs, err := openURL(ctx, "redis://"+srv.Addr, func(o *redisstore.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	if err != nil {
		t.Fatal(err)
	}
	_, url := serveShared(t, rs, totalConfig())
	if st := postBatch(t, url, oneDelta("oom", 1)); st != 200 {
		t.Fatalf("batch 1: %d", st)
	}
	waitHealth(t, url, 200)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	if err := rc.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if st := postBatch(t, url, oneDelta("oom", 2)); st != 503 {
		t.Errorf("a batch while Redis is out of memory: %d, want 503", st)
	}
	waitHealth(t, url, 503)
	if st := rs.Stats(); st.Errors == 0 || st.Outages != 1 {
		t.Errorf("Redis errors %d, outages %d while every write was refused OOM; want some, and one outage", st.Errors, st.Outages)
	}
	if n := strings.Count(logs.String(), "OOM"); n == 0 {
		t.Errorf("nothing logged of the OOM refusals:\n%s", logs.String())
	}
	if err := rc.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, url, 200)
	if st := postBatch(t, url, oneDelta("oom", 2)); st != 200 {
		t.Errorf("the batch again once memory was freed: %d, want 200", st)
	}
}
