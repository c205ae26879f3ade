package host

import (
	"net/http"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/syncloop"
)

// TestHealthNeverSyncedIs503AtOnce: a host whose coordinator does not
// answer is 503 ("unreachable") at its first /healthz, long before its
// stale bound (10 s), though no isolate ever tried to sync (no traffic).
func TestHealthNeverSyncedIs503AtOnce(t *testing.T) {
	s := serve(t, Options{Config: bigConfig(), Isolates: 2, Coordinator: "http://" + deadAddr(t),
		Sync: syncloop.Options{StaleAfter: 10 * time.Second}, SyncTimeout: time.Second})
	code, hl := s.health(t)
	if code != http.StatusServiceUnavailable || hl.Status != "unreachable" || hl.ProbeError == "" || hl.CoordinatorAgeMS != -1 {
		t.Fatalf("healthz of a host that never reached its coordinator: %d %+v", code, hl)
	}
	for _, ih := range hl.Isolates {
		if ih.LastSyncAgeMS != -1 {
			t.Errorf("isolate %+v: a sync age without a sync", ih)
		}
	}
}

// TestHealthFailingIs503AtOnce: with traffic and a coordinator that does
// not answer, /healthz is 503 at once (the probe fails before the first
// attempt does), then "failing" from the first failed attempt, before the
// isolates are stale (10 s).
func TestHealthFailingIs503AtOnce(t *testing.T) {
	s := serve(t, Options{Config: bigConfig(), Isolates: 1, Coordinator: "http://" + deadAddr(t),
		Sync: syncloop.Options{Interval: 20 * time.Millisecond, StaleAfter: 10 * time.Second}, SyncTimeout: time.Second})
	s.admit(t, "k", 3)
	if code, hl := s.health(t); code != http.StatusServiceUnavailable {
		t.Fatalf("healthz right after the traffic: %d %+v", code, hl)
	}
	hl := s.waitStatus(t, "failing")
	if code, _ := s.health(t); code != http.StatusServiceUnavailable || hl.Isolates[0].Stale || hl.Isolates[0].Failures == 0 {
		t.Fatalf("healthz: %+v, want failing, not stale", hl)
	}
}

// TestHealthIdleProbesTheCoordinator: an idle host (no traffic: nothing to
// sync) is healthy while its coordinator answers the probe, with real
// ages (no isolate synced: -1; the coordinator answered just now), and
// 503 ("unreachable") once the coordinator is gone, still without
// traffic. After traffic, isolates report the age of their last reply.
func TestHealthIdleProbesTheCoordinator(t *testing.T) {
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", bigConfig(), []string{"tok"})
	defer func() { k.stop(t) }()
	s := serve(t, Options{Config: bigConfig(), Isolates: 2, Coordinator: "http://" + k.addr, Token: "tok",
		Sync: syncloop.Options{Interval: 20 * time.Millisecond, StaleAfter: 100 * time.Millisecond}})
	code, hl := s.health(t)
	if code != http.StatusOK || hl.CoordinatorAgeMS < 0 || hl.CoordinatorAgeMS > hl.StaleAfterMS {
		t.Fatalf("idle host, coordinator up: %d %+v", code, hl)
	}
	for _, ih := range hl.Isolates {
		if ih.LastSyncAgeMS != -1 {
			t.Errorf("isolate %+v: a sync age without a sync", ih)
		}
	}
	s.admit(t, "k", 2)
	waitCount(t, k, "k", 2)
	code, hl = s.health(t)
	for _, ih := range hl.Isolates {
		if code != http.StatusOK || ih.LastSyncAgeMS < 0 {
			t.Errorf("after traffic: %d, isolate %+v: want its last reply's age", code, ih)
		}
	}
	k.stop(t)
	hl = s.waitHealth(t, http.StatusServiceUnavailable)
	if hl.Status != "unreachable" || hl.ProbeError == "" {
		t.Fatalf("idle host, coordinator gone: %+v", hl)
	}
	if s.h.SyncErrors() != 0 {
		t.Errorf("%d sync errors: the host was not idle", s.h.SyncErrors())
	}
}
