package host

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/syncloop"
)

// TestCoordinatorFailoverReported: with the coordinator an isolate prefers
// unreachable, its syncs move on to the other; /metrics and /healthz say
// which one is in use and count the failover.
func TestCoordinatorFailoverReported(t *testing.T) {
	k := startCoord(t, t.TempDir(), "127.0.0.1:0", bigConfig(), nil)
	defer k.stop(t)
	// The dead one hangs (a black hole): the first attempt fails over only
	// after its timeout (1 s), well after the checks before any sync.
	// (Refusing connections, it failed over within milliseconds, at times
	// before those checks under load.)
	hanging, _ := hangingAddr(t)
	dead, live := "http://"+hanging, "http://"+k.addr
	// An isolate id that prefers the first (dead) coordinator.
	prefix := "t"
	for i := 0; syncloop.Preferred(prefix+"-0", 2) != 0; i++ {
		prefix = "t" + strconv.Itoa(i)
	}
	s := serve(t, Options{Config: bigConfig(), Isolates: 1, IDPrefix: prefix, Coordinator: dead + "," + live,
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
	if code != http.StatusOK || hl.CoordinatorInUse != live || hl.CoordinatorFailovers != 1 || hl.Isolates[0].Coordinator != live {
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

// TestCoordinatorSpread: a host's isolates spread their syncs over the
// coordinators listed, each to the one its id prefers; /healthz lists both
// in use and /metrics counts the isolates on each.
func TestCoordinatorSpread(t *testing.T) {
	k1 := startCoord(t, t.TempDir(), "127.0.0.1:0", bigConfig(), nil)
	defer k1.stop(t)
	k2 := startCoord(t, t.TempDir(), "127.0.0.1:0", bigConfig(), nil)
	defer k2.stop(t)
	urls := []string{"http://" + k1.addr, "http://" + k2.addr}
	const isolates = 8
	var on [2]int
	for i := 0; i < isolates; i++ {
		on[syncloop.Preferred("spread-"+strconv.Itoa(i), 2)]++
	}
	if on[0] == 0 || on[1] == 0 {
		t.Fatalf("all ids prefer one coordinator: %v", on)
	}
	s := serve(t, Options{Config: bigConfig(), Isolates: isolates, IDPrefix: "spread", Coordinator: urls[0] + "," + urls[1],
		Sync: syncloop.Options{Interval: 20 * time.Millisecond, StaleAfter: 5 * time.Second}, SyncTimeout: time.Second})
	_, hl := s.health(t)
	if hl.CoordinatorInUse != urls[0]+","+urls[1] || hl.CoordinatorFailovers != 0 {
		t.Fatalf("healthz: %+v", hl)
	}
	for i, ih := range hl.Isolates {
		if want := urls[syncloop.Preferred(ih.ID, 2)]; ih.Coordinator != want {
			t.Fatalf("isolate %d (%s) syncs to %s, want %s", i, ih.ID, ih.Coordinator, want)
		}
	}
	m := s.metrics(t)
	for j, u := range urls {
		if !hasMetric(m, `edgelimit_edge_coordinator_info{url="`+u+`"}`, strconv.Itoa(on[j])) {
			t.Fatalf("metrics: want %d isolates on %s:\n%s", on[j], u, m)
		}
	}
}
