package coordinator

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
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
	return metricsTextAs(t, url, "")
}

// metricsTextAs is metricsText with a bearer token (none when empty).
func metricsTextAs(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequest("GET", url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestDiskFullBacksOffAndIsUnhealthy: Pebble on disk whose table writes
// fail with ENOSPC (coordtest.DiskFull, Pebble's errorfs), as on a full
// filesystem. The WAL still takes commits, but the failed flush makes
// /healthz (with the reason) and sync answer 503 (nothing applied) and the
// gauges read unhealthy and failing; the store retries the flush with
// backoff (a handful of attempts in 600 ms, not thousands); once tables can
// be written again the retried flush succeeds, the coordinator is healthy,
// counts the retried batch once, and every acknowledged batch is still
// there after a restart.
func TestDiskFullBacksOffAndIsUnhealthy(t *testing.T) {
	disk := coordtest.NewDiskFull(vfs.Default)
	dir := t.TempDir()
	store, err := pebblestore.Open(disk.FS, dir)
	if err != nil {
		t.Fatal(err)
	}
	c, clk, srv := newTestServer(t, func(o *Options) { o.Store = store })
	post := func(seq int64) (int, *wire.Reply, problem) {
		return syncAs(t, srv, "", batch("a", seq, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: seq}))
	}
	for seq := int64(1); seq <= 20; seq++ {
		if st, _, p := post(seq); st != 200 {
			t.Fatalf("seq %d: %d %+v", seq, st, p)
		}
	}
	const acked = 20 * 21 / 2
	waitHealth(t, srv.URL, 200)
	disk.Full.Store(true)
	if err := store.Flush(); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, srv.URL, 503)
	from := disk.Attempts()
	for i := 0; i < 2; i++ {
		st, _, p := post(21)
		if st != 503 || p.Type != "urn:edgelimit:problem:unavailable" {
			t.Fatalf("sync while flushes fail: %d %+v", st, p)
		}
	}
	time.Sleep(600 * time.Millisecond)
	attempts := disk.Attempts() - from
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	reason, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := metricsText(t, srv.URL)
	t.Logf("600 ms of full disk: %d flushes started; /healthz %d %s", attempts, resp.StatusCode, reason)
	if resp.StatusCode != 503 || !strings.Contains(string(reason), "no space left on device") ||
		!strings.Contains(string(reason), "since") {
		t.Fatalf("/healthz while failing: %d %s", resp.StatusCode, reason)
	}
	if attempts > 12 {
		t.Fatalf("%d flushes started in 600 ms of full disk: not backed off", attempts)
	}
	if metricValue(t, m, "edgelimit_coordinator_store_healthy") != 0 ||
		metricValue(t, m, "edgelimit_coordinator_store_background_errors_total") == 0 ||
		metricValue(t, m, "edgelimit_coordinator_store_failing_seconds") < 0.6 {
		t.Fatalf("metrics while failing:\n%s", m)
	}
	disk.Full.Store(false)
	waitHealth(t, srv.URL, 200)
	st, rp, p := post(21)
	if st != 200 || viewOf(t, rp, "fw", "k").Count != acked+21 {
		t.Fatalf("after recovery: %d %+v %+v", st, rp, p)
	}
	m = metricsText(t, srv.URL)
	if metricValue(t, m, "edgelimit_coordinator_store_healthy") != 1 ||
		metricValue(t, m, "edgelimit_coordinator_store_failing_seconds") != 0 {
		t.Fatalf("metrics after recovery:\n%s", m)
	}
	srv.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	store, err = pebblestore.Open(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	c, _ = newTestCoordinator(t, clk.now(), func(o *Options) { o.Store = store })
	if ks := getKey(t, c, "fw", "k"); ks.Count != acked+21 {
		t.Fatalf("after a restart: count %d, acknowledged %d", ks.Count, acked+21)
	}
}

// TestCommitFailureIsFailing: a failed commit shows in the failing gauge
// until a commit succeeds.
func TestCommitFailureIsFailing(t *testing.T) {
	inner, err := pebblestore.Open(vfs.NewMem(), "")
	if err != nil {
		t.Fatal(err)
	}
	fs := &flakyStore{Store: inner}
	_, clk, srv := newTestServer(t, func(o *Options) { o.Store = fs })
	post := func(seq int64) int {
		st, _, _ := syncAs(t, srv, "", batch("a", seq, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: 1}))
		return st
	}
	fs.failing.Store(true)
	if st := post(1); st != 503 {
		t.Fatalf("failing commit: %d", st)
	}
	time.Sleep(20 * time.Millisecond)
	if f := metricValue(t, metricsText(t, srv.URL), "edgelimit_coordinator_store_failing_seconds"); f <= 0 {
		t.Fatalf("failing for %g s after a failed commit 20 ms ago", f)
	}
	fs.failing.Store(false)
	// /healthz says the store is back before any batch commits (it said
	// 503 until one did, which a load balancer that routes by it never
	// sent).
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz 3 s after writes work again, no batch sent: %d", resp.StatusCode)
		}
	}
	if st := post(1); st != 200 {
		t.Fatalf("after recovery: %d", st)
	}
	if f := metricValue(t, metricsText(t, srv.URL), "edgelimit_coordinator_store_failing_seconds"); f != 0 {
		t.Fatalf("failing for %g s after a successful commit", f)
	}
}
