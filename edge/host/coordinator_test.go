package host

import (
	"net/http"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/syncloop"
)

// TestCoordinatorFailoverReported: with the first coordinator of the list
// unreachable, the syncs move on to the second; /metrics and /healthz say
// which one is in use and count the failover.
func TestCoordinatorFailoverReported(t *testing.T) {
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", bigConfig(), nil)
	defer k.stop(t)
	dead, live := "http://"+deadAddr(t), "http://"+k.addr
	s := serve(t, Options{Config: bigConfig(), Isolates: 2, Coordinator: dead + "," + live,
		Sync: syncloop.Options{Interval: 20 * time.Millisecond, StaleAfter: 5 * time.Second}, SyncTimeout: time.Second})
	code, hl := s.health(t)
	if hl.CoordinatorInUse != dead || hl.CoordinatorFailovers != 0 {
		t.Fatalf("before any sync: %d %+v, want %s in use and no failover", code, hl, dead)
	}
	if m := s.metrics(t); !hasMetric(m, `edgelimit_edge_coordinator_info{url="`+dead+`"}`, "1") ||
		!hasMetric(m, "edgelimit_edge_coordinator_failovers_total", "0") {
		t.Fatalf("metrics before any sync:\n%s", m)
	}
	s.admit(t, "k", 4)
	waitCount(t, k, "k", 4)
	code, hl = s.health(t)
	if code != http.StatusOK || hl.CoordinatorInUse != live || hl.CoordinatorFailovers != 1 {
		t.Fatalf("after the syncs: %d %+v, want %s in use after 1 failover", code, hl, live)
	}
	m := s.metrics(t)
	if !hasMetric(m, `edgelimit_edge_coordinator_info{url="`+live+`"}`, "1") ||
		!hasMetric(m, "edgelimit_edge_coordinator_failovers_total", "1") {
		t.Fatalf("metrics after the failover:\n%s", m)
	}
}

// TestCoordinatorMetricsAlone: a host without a coordinator exports no
// coordinator series and reports none in use.
func TestCoordinatorMetricsAlone(t *testing.T) {
	s := serve(t, Options{Config: bigConfig(), Isolates: 1})
	if _, hl := s.health(t); hl.CoordinatorInUse != "" || hl.CoordinatorFailovers != 0 {
		t.Fatalf("healthz alone: %+v", hl)
	}
	if m := s.metrics(t); hasMetric(m, "edgelimit_edge_coordinator_failovers_total", "0") {
		t.Fatalf("a host alone exports coordinator series:\n%s", m)
	}
}
