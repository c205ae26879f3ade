package host

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/syncloop"
)

// hungLoad sends a decision of limiter on keys in turn every 10 ms from 4
// clients for d and returns, of the decisions that began after skip, how
// many there were, how many were admitted and how many took 500 ms or more
// (half the retry wait: a request that waited for an attempt that hung).
func hungLoad(t *testing.T, s served, clients int, limiter string, keys []string, d, skip time.Duration) (n, admitted, slow int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start, pause := time.Now(), time.Duration(clients)*10*time.Millisecond/16
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Since(start) < d; i++ {
				began := time.Now()
				resp, err := http.Get(s.url + "/v1/decide?" + url.Values{"limiter": {limiter}, "key": {keys[(c+i)%len(keys)]}}.Encode())
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				took := time.Since(began)
				if began.Sub(start) >= skip {
					mu.Lock()
					n++
					if resp.StatusCode == http.StatusOK {
						admitted++
					}
					if took >= 500*time.Millisecond {
						slow++
					}
					mu.Unlock()
				}
				time.Sleep(pause)
			}
		}()
	}
	wg.Wait()
	return n, admitted, slow
}

// TestHungCoordinatorNoRequestWaits: a coordinator that hangs (it reads
// each sync and never answers, as one stopped with SIGSTOP) behind four
// isolates under steady traffic on an auto key with the open policy. Once
// the view is stale, requests are decided by the policy at once: none
// waits for an attempt. Before, a request that came between an attempt
// abandoned as hung and the next found the isolate quiet and waited the
// whole retry wait (1 s) for a probe that hung too, with every request
// after it: a quarter of requests took about 1 s.
func TestHungCoordinatorNoRequestWaits(t *testing.T) {
	cfg := leasedPolicyConfig()
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", cfg, nil)
	defer k.stop(t)
	p := newFaultyProxy(t, "http://"+k.addr)
	s := serve(t, Options{Config: cfg, Isolates: 4, Coordinator: p.srv.URL})
	if a, _, _ := s.tally(t, "auto-open", "k", 8); a != 8 {
		t.Fatalf("with the coordinator up: %d of 8 admitted", a)
	}
	p.mode.Store(proxyHang)
	retryStarved(t, func() string {
		n, admitted, slow := hungLoad(t, s, 16, "auto-open", []string{"a", "b", "c"}, 6*time.Second, 2*time.Second)
		t.Logf("coordinator hung, seconds 2-6: %d decisions, %d admitted, %d took 500 ms or more", n, admitted, slow)
		if slow > 0 || admitted != n {
			return fmt.Sprintf("coordinator hung, seconds 2-6: %d of %d decisions took 500 ms or more, %d admitted; want none waiting, all admitted (open)", slow, n, admitted)
		}
		return ""
	})
}

// TestCoordinatorHungFromStartServedByPolicy: the host starts with a
// coordinator that hangs from the start (its first act, reading the
// coordinator's time, gets no answer). Once the view is stale (an attempt
// in flight past a second), the open policy admits on auto and strict
// keys at once. Before, that read was no attempt in flight: nothing was
// stale and every request was denied after its retry wait (1 s) until the
// read timed out (5 s); then every request waited again for a probe that
// hung.
func TestCoordinatorHungFromStartServedByPolicy(t *testing.T) {
	cfg := leasedPolicyConfig()
	p := newFaultyProxy(t, "http://127.0.0.1:1")
	p.mode.Store(proxyHang)
	s := serve(t, Options{Config: cfg, Isolates: 2, Coordinator: p.srv.URL})
	for _, lim := range []string{"auto-open", "strict-open"} {
		retryStarved(t, func() string {
			n, admitted, slow := hungLoad(t, s, 4, lim, []string{"a", "b"}, 4*time.Second, 2*time.Second)
			t.Logf("%s, hung from the start, seconds 2-4: %d decisions, %d admitted, %d took 500 ms or more", lim, n, admitted, slow)
			if slow > 0 || admitted != n {
				return fmt.Sprintf("%s, hung from the start, seconds 2-4: %d of %d decisions took 500 ms or more, %d admitted; want none waiting, all admitted (open)", lim, slow, n, admitted)
			}
			return ""
		})
	}
}

// TestHealthProbeOfAHungCoordinator: an idle edge's /healthz probes its
// coordinator (nothing heard within the stale bound); when the coordinator
// hangs (a black hole, SIGSTOP), the probe gives up as an attempt does
// (hungAfter: a second here) and answers 503 unreachable. Before, it waited
// out the whole sync timeout (5 s by default, 10 s here), past the
// health-check timeout of most load balancers.
func TestHealthProbeOfAHungCoordinator(t *testing.T) {
	cfg := leasedPolicyConfig()
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", cfg, nil)
	defer k.stop(t)
	p := newFaultyProxy(t, "http://"+k.addr)
	s := serve(t, Options{Config: cfg, Isolates: 2, Coordinator: p.srv.URL, SyncTimeout: 10 * time.Second, Heartbeat: -1,
		Sync: syncloop.Options{Interval: 100 * time.Millisecond, StaleAfter: 300 * time.Millisecond}})
	if a, _, _ := s.tally(t, "auto-open", "k", 4); a != 4 {
		t.Fatalf("with the coordinator up: %d of 4 admitted", a)
	}
	time.Sleep(500 * time.Millisecond) // idle past the stale bound: /healthz probes
	if st, hl := s.health(t); st != http.StatusOK {
		t.Fatalf("idle, coordinator up: %d %+v", st, hl)
	}
	p.mode.Store(proxyHang)
	time.Sleep(500 * time.Millisecond)
	began := time.Now()
	st, hl := s.health(t)
	took := time.Since(began)
	p.mode.Store(proxyPass) // (the graceful stop's last sync then goes through)
	t.Logf("coordinator hung: /healthz %d %s after %v", st, hl.Status, took.Round(time.Millisecond))
	if st != http.StatusServiceUnavailable || hl.Status != "unreachable" || took >= 5*time.Second {
		t.Errorf("coordinator hung: /healthz %d %q after %v; want 503 unreachable within the hung bound (1 s), not the sync timeout (10 s)", st, hl.Status, took)
	}
}
