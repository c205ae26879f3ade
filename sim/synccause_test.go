package sim

import (
	"context"
	"testing"
	"time"
)

// total returns the batches c counts.
func (c SyncCauses) total() int64 { return c.Regular + c.Early + c.Held + c.Retries }

// Every sync request of an edge strategy has one cause: the batches by
// cause plus the amendments are the sync requests. On bursty-5000 (a busy
// strict key at 110 decisions/s per isolate) each cause but retries
// shows: the module asks for early syncs as leases run low, requests held
// for a lease cut batches and amend them, and the interval's timer reports.
func TestSyncCausesAddUp(t *testing.T) {
	r := runBuiltin(t, "corpus/bursty-5000", 5*time.Second, Auto, 100*time.Millisecond)
	c := r.SyncCauses
	if c.total()+r.Amendments != r.SyncRequests {
		t.Fatalf("causes %+v and %d amendments sum to %d, want the %d sync requests", c, r.Amendments,
			c.total()+r.Amendments, r.SyncRequests)
	}
	if c.Regular == 0 || c.Early == 0 || c.Held == 0 || r.Amendments == 0 {
		t.Errorf("causes %+v, %d amendments: want regular, early and held batches and amendments", c, r.Amendments)
	}
	if c.Retries != 0 || r.SyncFailures != 0 {
		t.Errorf("%d retries after %d failures on a lossless network", c.Retries, r.SyncFailures)
	}
}

// A batch sent again after a lost attempt counts as a retry; the central
// strategy's round trips are no batches.
func TestSyncCausesCountRetries(t *testing.T) {
	sc := small(t, 8, 100, 300, "poisson", 4*time.Second)
	sc.Network.Loss = 0.1
	sc.Network.Timeout = Duration(200 * time.Millisecond)
	if err := sc.Prepare(); err != nil {
		t.Fatal(err)
	}
	s := testSim(t)
	r, err := s.Run(context.Background(), sc, Strict, 100*time.Millisecond, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.SyncFailures == 0 || r.SyncCauses.Retries == 0 {
		t.Fatalf("%d failures, causes %+v: want retries after lost attempts", r.SyncFailures, r.SyncCauses)
	}
	if got := r.SyncCauses.total() + r.Amendments; got != r.SyncRequests {
		t.Errorf("causes %+v and %d amendments sum to %d, want the %d sync requests", r.SyncCauses, r.Amendments, got, r.SyncRequests)
	}
	c, err := s.Run(context.Background(), sc, Central, 100*time.Millisecond, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.SyncCauses.total() != 0 || c.SyncRequests == 0 {
		t.Errorf("central: causes %+v of %d round trips, want none", c.SyncCauses, c.SyncRequests)
	}
}
