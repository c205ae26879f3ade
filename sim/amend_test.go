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
