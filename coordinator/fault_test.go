package coordinator

import (
	"context"
	"errors"
	"fmt"
	"github.com/cockroachdb/pebble/v2/vfs"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// flakyStore fails every Commit while failing is set, like a full disk.
type flakyStore struct {
	merge.Store
	failing atomic.Bool
}

var errDiskFull = errors.New("no space left on device")

func (s *flakyStore) Commit(ops []merge.Op) error {
	if s.failing.Load() {
		return errDiskFull
	}
	return s.Store.Commit(ops)
}

func TestStoreWriteErrorThen503ThenRecovery(t *testing.T) {
	inner, err := pebblestore.Open(vfs.NewMem(), "")
	if err != nil {
		t.Fatal(err)
	}
	fs := &flakyStore{Store: inner}
	c, clk, srv := newTestServer(t, func(o *Options) { o.Store = fs })
	post := func(seq, delta int64) (int, []byte) {
		return httpPost(t, srv, MsgpackContentType, batch("a", seq, clk.now(),
			wire.Delta{Limiter: "fw", Key: "k", Window: 1000, Delta: delta},
			wire.Delta{Limiter: "sfw", Key: "k", Window: 1000, Delta: 0, Demand: 10}).AppendMsg(nil), nil)
	}
	if st, body := post(1, 5); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	fs.failing.Store(true)
	for i := 0; i < 3; i++ {
		st, body := post(2, 7)
		if st != 503 {
			t.Fatalf("write error gave %d %s", st, body)
		}
		if p := decodeProblem(t, body); p.Type != "urn:edgelimit:problem:unavailable" {
			t.Fatalf("problem %+v", p)
		}
	}
	if resp, _ := http.Get(srv.URL + "/healthz"); resp.StatusCode != 503 {
		t.Fatalf("healthz while failing: %d", resp.StatusCode)
	}
	fs.failing.Store(false)
	// The failed batch left no trace: its retry applies once.
	if ks := getKey(t, c, "fw", "k"); ks.Count != 5 {
		t.Fatalf("after failures: %+v", ks)
	}
	for i := 0; i < 2; i++ {
		st, body := post(2, 7)
		if st != 200 {
			t.Fatalf("after recovery: %d %s", st, body)
		}
		var rp wire.Reply
		if err := rp.UnmarshalMsg(body); err != nil {
			t.Fatal(err)
		}
		if v := viewOf(t, &rp, "fw", "k"); v.Count != 12 {
			t.Fatalf("after recovery: %+v", v)
		}
	}
	resp, _ := http.Get(srv.URL + "/healthz")
	if resp.StatusCode != 200 {
		t.Fatalf("healthz after recovery: %d", resp.StatusCode)
	}
	resp, _ = http.Get(srv.URL + "/metrics")
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !contains(out, `edgelimit_coordinator_request_errors_total{kind="unavailable"} 3`) {
		t.Fatalf("metrics:\n%s", out)
	}
}

func contains(b []byte, s string) bool { return len(s) == 0 || indexOf(string(b), s) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestFlappingStoreExactlyOnce: concurrent isolates sync while commits fail
// at random (pipelined groups on top of a failed one must fail too); each
// retries with the same Seq until acknowledged. Every acknowledged delta is
// counted exactly once.
func TestFlappingStoreExactlyOnce(t *testing.T) {
	inner, err := pebblestore.Open(vfs.NewMem(), "")
	if err != nil {
		t.Fatal(err)
	}
	fs := &flakyStore{Store: inner}
	c, clk := newTestCoordinator(t, t0, func(o *Options) { o.Store = fs; o.Merger.MaxCachedKeys = 4 })
	stop := make(chan struct{})
	flipped := make(chan struct{})
	go func() {
		defer close(flipped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				fs.failing.Store(false)
				return
			default:
			}
			fs.failing.Store(i%3 == 0)
			time.Sleep(300 * time.Microsecond)
		}
	}()
	// An operator's explicit checkpoints race the committer's own.
	ckDone := make(chan struct{})
	go func() {
		defer close(ckDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			c.Checkpoint(context.Background()) // fails while the store does
			time.Sleep(200 * time.Microsecond)
		}
	}()
	var mu sync.Mutex
	want := map[string]int64{}
	failures := 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for seq := int64(1); seq <= 150; seq++ {
				k := fmt.Sprintf("k%d", (int(seq)+i)%6)
				b := batch(fmt.Sprintf("iso%d", i), seq, clk.now(), wire.Delta{Limiter: "fw", Key: k, Window: 1000, Delta: seq})
				for {
					_, err := c.Sync(context.Background(), b)
					if err == nil {
						break
					}
					if !errors.Is(err, ErrUnavailable) {
						t.Error(err)
						return
					}
					mu.Lock()
					failures++
					mu.Unlock()
				}
				mu.Lock()
				want[k] += seq
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	<-flipped
	<-ckDone
	if failures == 0 {
		t.Fatal("no commit failed: the test did not exercise failures")
	}
	for k, n := range want {
		if ks := getKey(t, c, "fw", k); ks.Count != n {
			t.Errorf("%s: count %d, acknowledged %d", k, ks.Count, n)
		}
	}
	t.Logf("%d failed syncs retried", failures)
}
