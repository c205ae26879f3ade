package coordinator

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// waitHealth polls /healthz until it answers want (at most 10 s).
func waitHealth(t *testing.T, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz still %d after 10 s, want %d", resp.StatusCode, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestDiskFullOnFlushIsUnhealthy: Pebble on disk whose table writes fail
// with ENOSPC (errorfs), as on a full filesystem. The WAL still takes
// commits, but the failed flush makes /healthz and sync answer 503 (nothing
// applied) and the gauge read 0; once tables can be written again Pebble's
// retried flush succeeds, and the coordinator is healthy and counts the
// retried batch once.
func TestDiskFullOnFlushIsUnhealthy(t *testing.T) {
	var full atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && strings.HasSuffix(op.Path, ".sst") &&
			(op.Kind == errorfs.OpCreate || op.Kind.ReadOrWrite() == errorfs.OpIsWrite) {
			return syscall.ENOSPC
		}
		return nil
	}))
	store, err := pebblestore.Open(fs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, clk, srv := newTestServer(t, func(o *Options) { o.Store = store })
	post := func(seq int64) (int, *wire.Reply, problem) {
		return syncAs(t, srv, "", batch("a", seq, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: seq}))
	}
	if st, _, p := post(1); st != 200 {
		t.Fatalf("seq 1: %d %+v", st, p)
	}
	waitHealth(t, srv.URL, 200)
	full.Store(true)
	if err := store.Flush(); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, srv.URL, 503)
	for i := 0; i < 2; i++ {
		st, _, p := post(2)
		if st != 503 || p.Type != "urn:edgelimit:problem:unavailable" {
			t.Fatalf("sync while flushes fail: %d %+v", st, p)
		}
	}
	m := metricsText(t, srv.URL)
	if !strings.Contains(m, "edgelimit_coordinator_store_healthy 0") ||
		strings.Contains(m, "edgelimit_coordinator_store_background_errors_total 0\n") {
		t.Fatalf("metrics while failing:\n%s", m)
	}
	full.Store(false)
	waitHealth(t, srv.URL, 200)
	st, rp, p := post(2)
	if st != 200 || viewOf(t, rp, "fw", "k").Count != 3 {
		t.Fatalf("after recovery: %d %+v %+v", st, rp, p)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 3 {
		t.Fatalf("count %d, want 1+2", ks.Count)
	}
	if m := metricsText(t, srv.URL); !strings.Contains(m, "edgelimit_coordinator_store_healthy 1") {
		t.Fatalf("metrics after recovery:\n%s", m)
	}
}
