package coordinator

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// fwFollowsUpstream configures the test limiter "fw" to follow its
// upstream: only such limiters take upstream signals (pauses).
func fwFollowsUpstream(o *Options) {
	o.Config.Limiters = append([]wire.LimiterConfig(nil), o.Config.Limiters...)
	for i := range o.Config.Limiters {
		if o.Config.Limiters[i].Name == "fw" {
			o.Config.Limiters[i].Upstream = &wire.UpstreamConfig{}
		}
	}
}

// metricValue returns the value of series (name{labels} exactly as the
// text exposition writes it) in text, and fails t when it is absent.
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no series %s in:\n%s", series, text)
	return 0
}

// TestLimiterMetrics: the per-limiter series over HTTP after real syncs:
// admitted and denied are what the batches report (a retried batch counts
// once), near/at-limit gauges count keys per limiter from their views and
// drop them when the window ends, a reset key leaves them, the pause gauge
// follows the merged pause, and labels are limiter names only.
func TestLimiterMetrics(t *testing.T) {
	c, clk, srv := newTestServer(t, fwFollowsUpstream)
	w := clk.now() / sec
	b1 := batch("a", 1, clk.now(),
		wire.Delta{Limiter: "fw", Key: "k1", Window: w, Delta: 85, Demand: 90},    // 85%: near
		wire.Delta{Limiter: "fw", Key: "k2", Window: w, Delta: 100, Demand: 130},  // 100%: at the limit
		wire.Delta{Limiter: "fw", Key: "vip", Window: w, Delta: 500, Demand: 500}, // override 1000: 50%
		wire.Delta{Limiter: "tb", Key: "b", Delta: 20, Demand: 25},                // bucket of 20 full
		wire.Delta{Limiter: "sw", Key: "s", Window: w, Delta: 10, Demand: 10})
	b1.Signals = []wire.Signal{{Limiter: "fw", Key: "k2", Pause: 30 * sec}}
	for i := 0; i < 2; i++ { // the second is a retry: applied once
		if st, _, p := syncAs(t, srv, "", b1); st != 200 {
			t.Fatalf("sync: %d %+v", st, p)
		}
	}
	// Over Redis (TestMergeOnRedisCluster runs this test too) the shared
	// merger does not merge upstream signals yet (merge/shared.go applies
	// each bucket's entries without the batch's Signals, and its replies
	// carry no upstream views), so no key is paused there.
	paused := 1.0
	if testStore != nil {
		paused = 0
		t.Log("shared mode: upstream signals are not merged, keys_paused is 0")
	}
	m := metricsText(t, srv.URL)
	for series, want := range map[string]float64{
		`edgelimit_coordinator_admitted_total{limiter="fw"}`:        685,
		`edgelimit_coordinator_denied_total{limiter="fw"}`:          35,
		`edgelimit_coordinator_admitted_total{limiter="tb"}`:        20,
		`edgelimit_coordinator_denied_total{limiter="tb"}`:          5,
		`edgelimit_coordinator_admitted_total{limiter="sw"}`:        10,
		`edgelimit_coordinator_denied_total{limiter="sw"}`:          0,
		`edgelimit_coordinator_admitted_total{limiter="gcra"}`:      0,
		`edgelimit_coordinator_upstream_pauses_total{limiter="fw"}`: 1,
		`edgelimit_coordinator_keys_near_limit{limiter="fw"}`:       2,
		`edgelimit_coordinator_keys_at_limit{limiter="fw"}`:         1,
		`edgelimit_coordinator_keys_near_limit{limiter="tb"}`:       1,
		`edgelimit_coordinator_keys_at_limit{limiter="tb"}`:         1,
		`edgelimit_coordinator_keys_near_limit{limiter="sw"}`:       0,
		`edgelimit_coordinator_keys_paused{limiter="fw"}`:           paused,
		`edgelimit_coordinator_keys_circuit_open{limiter="fw"}`:     0,
		`edgelimit_coordinator_keys_untracked_total`:                0,
		`edgelimit_coordinator_syncs_total`:                         1,
		`edgelimit_coordinator_duplicates_dropped_total`:            1,
	} {
		if got := metricValue(t, m, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if strings.Contains(m, `key="`) {
		t.Errorf("a series is labelled by key:\n%s", m)
	}

	// A reset drops the key from the gauges.
	if err := c.ResetKey(context.Background(), "fw", "k1"); err != nil {
		t.Fatal(err)
	}
	m = metricsText(t, srv.URL)
	if got := metricValue(t, m, `edgelimit_coordinator_keys_near_limit{limiter="fw"}`); got != 1 {
		t.Errorf("near limit after resetting k1: %v, want 1", got)
	}

	// The next window: no key near its limit; the pause (30 s) holds.
	clk.add(sec)
	m = metricsText(t, srv.URL)
	for series, want := range map[string]float64{
		`edgelimit_coordinator_keys_near_limit{limiter="fw"}`: 0,
		`edgelimit_coordinator_keys_at_limit{limiter="fw"}`:   0,
		`edgelimit_coordinator_keys_paused{limiter="fw"}`:     paused,
		`edgelimit_coordinator_admitted_total{limiter="fw"}`:  685,
	} {
		if got := metricValue(t, m, series); got != want {
			t.Errorf("a window later: %s = %v, want %v", series, got, want)
		}
	}
	clk.add(30 * sec)
	m = metricsText(t, srv.URL)
	if got := metricValue(t, m, `edgelimit_coordinator_keys_paused{limiter="fw"}`); got != 0 {
		t.Errorf("after the pause: keys_paused %v, want 0", got)
	}
}

// TestLimiterMetricsBounded: past its bound the tracker takes no new key
// and counts it untracked; a key that cools down makes room again.
func TestLimiterMetricsBounded(t *testing.T) {
	cfg := testConfig()
	now := 1000 * sec
	lm := newLimiterMetrics(cfg, func() int64 { return now }, 1)
	view := func(key string, count int64) wire.View {
		return wire.View{Limiter: "fw", Key: key, Window: 1000, Count: count, Lease: -1, Isolates: 1}
	}
	lm.Applied(&wire.Batch{}, &wire.Reply{Entries: []wire.View{view("a", 90), view("b", 95)}}, now)
	if lm.tracked != 1 || lm.untracked != 1 || len(lm.lims["fw"].hot) != 1 {
		t.Fatalf("tracked %d untracked %d hot %v", lm.tracked, lm.untracked, lm.lims["fw"].hot)
	}
	lm.Applied(&wire.Batch{}, &wire.Reply{Entries: []wire.View{view("a", 10), view("b", 95)}}, now)
	if _, ok := lm.lims["fw"].hot["b"]; !ok || lm.tracked != 1 || lm.untracked != 1 {
		t.Fatalf("after a cooled down: tracked %d untracked %d hot %v", lm.tracked, lm.untracked, lm.lims["fw"].hot)
	}
}

// BenchmarkLimiterMetricsApplied: what the per-limiter series add to the
// merge of a batch of 1,000 entries (1,000 distinct keys per batch, counts
// spread so that some are near their limit), as BenchmarkDashboardApplied
// measures the dashboard's.
func BenchmarkLimiterMetricsApplied(b *testing.B) {
	t0 := 1000 * sec
	lm := newLimiterMetrics(testConfig(), func() int64 { return t0 }, DefaultMaxTrackedKeys)
	const batches = 100
	bts, rps := make([]*wire.Batch, batches), make([]*wire.Reply, batches)
	for n := range batches {
		bts[n], rps[n] = &wire.Batch{Entries: make([]wire.Delta, 1000)}, &wire.Reply{Entries: make([]wire.View, 1000)}
		for i := range 1000 {
			k := "k" + strconv.Itoa(n*1000+i)
			bts[n].Entries[i] = wire.Delta{Limiter: "fw", Key: k, Window: 1000, Delta: 1, Demand: 2}
			rps[n].Entries[i] = wire.View{Limiter: "fw", Key: k, Window: 1000, Count: int64((n*31 + i*7) % 101)}
		}
	}
	n := 0
	for b.Loop() {
		lm.Applied(bts[n%batches], rps[n%batches], t0)
		n++
	}
}
