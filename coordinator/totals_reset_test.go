package coordinator

import (
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/dashboard"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestHugeDenialsDoNotPinTotals: one batch of 8,192 denials of 2^50 (a
// client with an edge token) does not hold a limiter's denied total for
// the life of the process: past 2^53 it starts again, which Prometheus
// reads as a counter reset, and the denials after it are counted. Before,
// edgelimit_coordinator_denied_total and the dashboard's denied_total sat
// at 2^63-1 and an honest batch's 1,000 denials changed nothing.
func TestHugeDenialsDoNotPinTotals(t *testing.T) {
	_, clk, srv := newTestServer(t, nil)
	w := clk.now() / sec
	huge := batch("flood", 1, clk.now())
	huge.Denials = make([]wire.Denial, wire.MaxBatchEntries)
	for i := range huge.Denials {
		huge.Denials[i] = wire.Denial{Limiter: "fw", Key: "k" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676)), Window: w, Cost: wire.MaxLimit}
	}
	if st, _, p := syncAs(t, srv, "", huge); st != 200 {
		t.Fatalf("the flood's batch: %d %+v", st, p)
	}
	before := scrapeMetric(t, srv.URL, `edgelimit_coordinator_denied_total{limiter="fw"}`)
	if before > dashboard.MaxTotal {
		t.Fatalf("denied total %v after the flood, want at most 2^53", before)
	}
	honest := batch("honest", 1, clk.now())
	honest.Denials = []wire.Denial{{Limiter: "fw", Key: "x", Window: w, Cost: 1000}}
	if st, _, p := syncAs(t, srv, "", honest); st != 200 {
		t.Fatalf("the honest batch: %d %+v", st, p)
	}
	after := scrapeMetric(t, srv.URL, `edgelimit_coordinator_denied_total{limiter="fw"}`)
	if after == before {
		t.Fatalf("denied total %v unchanged by an honest batch's 1,000 denials after the flood", after)
	}
	var ls dashboard.LimitersView
	if st, b := apiGet(t, srv.URL+"/v1/limiters", "", &ls); st != 200 {
		t.Fatalf("GET /v1/limiters: %d %s", st, b)
	}
	if d := ls.Limiters[0].Denied; d > dashboard.MaxTotal || d <= 0 {
		t.Errorf("dashboard denied_total %d, want in (0, 2^53]", d)
	}
}

// TestAddTotal: a running total reaches MaxTotal at most and starts again
// from the addition past it; a negative or oversized addition is clamped.
func TestAddTotal(t *testing.T) {
	for _, c := range []struct{ total, d, want int64 }{
		{0, 5, 5},
		{dashboard.MaxTotal - 10, 10, dashboard.MaxTotal},
		{dashboard.MaxTotal - 10, 11, 11},
		{dashboard.MaxTotal, 1, 1},
		{7, -3, 0},
		{7, 1 << 62, dashboard.MaxTotal - 1},
	} {
		if got := dashboard.AddTotal(c.total, c.d); got != c.want {
			t.Errorf("AddTotal(%d, %d) = %d, want %d", c.total, c.d, got, c.want)
		}
	}
}
