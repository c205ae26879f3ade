package sim

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Three requests of one isolate within a round trip, each a lease miss:
// the first cuts a batch, the second amends it, and the third, held while
// that amendment is on its way, amends it again (syncloop.NextAsk); each
// waits one round trip. With one amendment per batch the third waited for
// the batch's reply, the amendment's, and then its own batch: 75.5 ms.
func TestHeldRequestsEachAskAtOnce(t *testing.T) {
	dir := t.TempDir()
	tr := "1.000,iso:0,api,k\n1.010,iso:0,api,k\n1.020,iso:0,api,k\n" +
		"3.000,iso:0,api,k\n3.010,iso:0,api,k\n3.020,iso:0,api,k\n"
	if err := os.WriteFile(filepath.Join(dir, "t.csv"), []byte(tr), 0o644); err != nil {
		t.Fatal(err)
	}
	js := `{"name": "held", "isolates": 4, "locations": 1, "duration": "5s", "trace": "t.csv",
	 "config": {"limiters": [{"name": "api", "algorithm": "fixed_window", "limit": 100, "period": "10s"}]},
	 "network": {"latency": {"dist": "fixed", "mean": "20ms"}}}`
	sc := scenarioIn(t, dir, js)
	r, err := testSim(t).Run(context.Background(), sc, Auto, 100*time.Millisecond, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 6 || r.Admitted != 6 || r.Waited != 6 {
		t.Fatalf("%d requests, %d admitted, %d waited; want 6, 6, 6 (each a lease miss)", r.Requests, r.Admitted, r.Waited)
	}
	if rt := Duration(40 * time.Millisecond); !withinWait(r.WaitP99, rt) {
		t.Errorf("the longest wait %v, want one round trip (%v)", time.Duration(r.WaitP99), time.Duration(rt))
	}
	if r.Amendments != 4 {
		t.Errorf("%d amendments, want 4 (two of each batch)", r.Amendments)
	}
}

// An isolate's batch reply is lost (a partition while it comes back), and
// the amendment a request held meanwhile sent is answered after the
// batch's attempt timed out: the module takes that reply as the batch's,
// and the sync succeeded, as the edge host and the JavaScript package
// count it. So the requests held after it ask at once, in a new batch
// and its amendments, and wait one round trip each. Before, the
// simulator took the reply as a second one: the isolate stayed backing
// off, the three requests waited for the retry's timer (about 100 ms,
// then a round trip: 100-140 ms), and the retry counted as one.
func TestAmendmentAnswersABatchWhoseReplyWasLost(t *testing.T) {
	dir := t.TempDir()
	tr := "1.000,iso:0,api,k\n1.046,iso:0,api,k\n1.100,iso:0,api,k\n1.105,iso:0,api,k\n1.110,iso:0,api,k\n"
	if err := os.WriteFile(filepath.Join(dir, "t.csv"), []byte(tr), 0o644); err != nil {
		t.Fatal(err)
	}
	// The batch cut at 1.000 arrives at 1.020, its reply would at 1.040:
	// the partition takes it; the batch times out at 1.060. The request
	// of 1.046 amends the batch (sent after the partition): answered at
	// 1.086.
	js := `{"name": "lost", "isolates": 4, "locations": 1, "duration": "3s", "trace": "t.csv",
	 "config": {"limiters": [{"name": "api", "algorithm": "fixed_window", "limit": 100, "period": "10s"}]},
	 "network": {"latency": {"dist": "fixed", "mean": "20ms"}, "timeout": "60ms",
	   "partitions": [{"isolate": 0, "start": "1.030s", "duration": "15ms"}]}}`
	sc := scenarioIn(t, dir, js)
	r, err := testSim(t).Run(context.Background(), sc, Auto, 100*time.Millisecond, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 5 || r.Admitted != 5 || r.Waited != 5 {
		t.Fatalf("%d requests, %d admitted, %d waited; want 5, 5, 5 (each a lease miss)", r.Requests, r.Admitted, r.Waited)
	}
	if r.SyncFailures != 1 || r.SyncCauses.Retries != 0 {
		t.Errorf("%d failed attempts, %d retries; want 1 (the batch whose reply was lost) and 0 (its amendment answered it)", r.SyncFailures, r.SyncCauses.Retries)
	}
	if rt := Duration(40 * time.Millisecond); !withinWait(r.WaitP50, rt) {
		t.Errorf("the median wait %v, want one round trip (%v): the three requests after the amendment's reply ask at once", time.Duration(r.WaitP50), time.Duration(rt))
	}
}
