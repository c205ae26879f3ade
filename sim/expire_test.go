package sim

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Held requests expire in the order they were held, so expire looks at
// the ones it denies and one more: it scanned every request held at each
// deadline, and a bin of 4e6 requests (a counts trace) over 8 isolates
// held 640,000 at once and spent most of a 56 s run there. Here (a bin of
// 50,000) the work is counted: at most two looks per request held.
func TestExpireLinearInHeldRequests(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bin.counts"), []byte("5e4\n5e4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"name": "held", "config": {"limiters": [{"name": "api", "algorithm": "fixed_window", "limit": 100, "period": "1s"}]},
		"isolates": 8, "locations": 2, "trace": "bin.counts"}`)
	sc, err := ParseScenario(data, dir)
	if err != nil {
		t.Fatal(err)
	}
	e := &engine{ctx: t.Context(), sc: sc, strategy: Auto, interval: int64(100 * time.Millisecond), seed: 1, rt: testSim(t).rt}
	defer e.close()
	if err := e.setup(); err != nil {
		t.Fatal(err)
	}
	if err := e.run(); err != nil {
		t.Fatal(err)
	}
	r := e.res
	t.Logf("%d requests, %d waited (%d denied after waiting), expire looked %d times", r.Requests, r.Waited, r.WaitedDenied, e.expireSeen)
	if r.WaitedDenied < 1000 {
		t.Fatalf("only %d held requests denied: the test no longer holds many at once", r.WaitedDenied)
	}
	if e.expireSeen > 2*r.Waited+int64(len(e.nodes)) {
		t.Errorf("expire looked at held requests %d times for %d held: want at most two looks each", e.expireSeen, r.Waited)
	}
}
