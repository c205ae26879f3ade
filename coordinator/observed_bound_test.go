package coordinator

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/dashboard"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestObservedTotalsBounded: a batch reporting more admitted cost for a key
// than any key of its limiter may admit in a window (only a hostile or
// broken client does) adds at most the limiter's largest limit or override
// per entry to the totals (admitted_total, the dashboard's):
// before, one batch of entries at 2^50 pinned them at the largest int64,
// and nothing admitted after it showed. The key's count is the store's, as
// reported.
func TestObservedTotalsBounded(t *testing.T) {
	c, clk, srv := newTestServer(t, nil)
	w := clk.now() / sec
	var es []wire.Delta
	for i := range 100 {
		es = append(es, wire.Delta{Limiter: "fw", Key: fmt.Sprintf("k%d", i), Window: w, Delta: wire.MaxLimit, Demand: wire.MaxLimit})
	}
	es = append(es, wire.Delta{Limiter: "fw", Key: "vip", Window: w, Delta: wire.MaxLimit}) // override 1000
	if st, _, p := syncAs(t, srv, "", batch("evil", 1, clk.now(), es...)); st != 200 {
		t.Fatalf("sync: %d %+v", st, p)
	}
	if st, _, p := syncAs(t, srv, "", batch("good", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "g", Window: w, Delta: 5, Demand: 5})); st != 200 {
		t.Fatalf("sync: %d %+v", st, p)
	}
	want := float64(101*1000 + 5) // fw: 100, vip's override 1000
	if got := metricValue(t, metricsText(t, srv.URL), `edgelimit_coordinator_admitted_total{limiter="fw"}`); got != want {
		t.Fatalf("admitted_total %v, want %v", got, want)
	}
	_, body := controlDo(t, srv, "GET", "/v1/limiters", "", "")
	var d struct{ Limiters []dashboard.LimiterView }
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, l := range d.Limiters {
		if l.Name == "fw" && (l.Admitted != int64(want) || l.Denied != 0) {
			t.Fatalf("dashboard admitted_total %d, denied_total %d; want %d and 0", l.Admitted, l.Denied, int64(want))
		}
	}
	if ks := getKey(t, c, "fw", "k0"); ks.Count != wire.MaxLimit {
		t.Fatalf("the key's count %d: the store counts what was reported", ks.Count)
	}
}
