package host

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgelimit/edgelimit/edge/syncloop"
)

// metrics are the Prometheus series of one Host, in its own registry
// (served by Handler at GET /metrics), with client_golang as the
// coordinator's (coordinator/metrics.go):
//
//	edgelimit_edge_decisions_total{limiter,result}              decisions by binding limiter, result allowed|denied
//	edgelimit_edge_fail_policy_decisions_total{limiter,policy,result}  decisions taken on a stale view
//	edgelimit_edge_sync_seconds{result}                         histogram of sync round trips, result ok|error
//	edgelimit_edge_sync_errors_total                            failed sync attempts
//	edgelimit_edge_view_age_seconds{isolate}                    time since the isolate's last good sync
//	edgelimit_edge_view_stale{isolate}                          1 while the fail policy applies
//	edgelimit_edge_unacked_cost{isolate}                        cost in the batch sent and not acknowledged
//	edgelimit_edge_unsynced_cost{isolate}                       cost admitted and not acknowledged (module stats)
//	edgelimit_edge_isolate_restarts_total{isolate}              restarts after a trap
//	edgelimit_edge_module_keys{isolate}                         keys the module tracks (module stats)
//	edgelimit_edge_module_evicted_unsynced_total{isolate}       cost lost to evictions before a sync (module stats)
//	edgelimit_edge_module_errors_total{isolate}                 module calls that returned an error (module stats)
//	edgelimit_edge_upstream_pauses_total{isolate}               key pauses an upstream's answer began, here or via the coordinator (module stats)
//	edgelimit_edge_upstream_circuit_opens_total{isolate}        key circuits opened (module stats)
//	edgelimit_edge_upstream_ignored_total{isolate}              upstream header values ignored as unreadable or out of range (module stats)
//	edgelimit_edge_coordinator_failovers_total                  times the syncs moved on to the next coordinator of --coordinator's list
//	edgelimit_edge_coordinator_info{url}                        isolates syncing to the coordinator at url (coordinator.go)
//	edgelimit_edge_clock_offset_seconds                         what the host adds to its clock to run on the coordinator's (clock.Offset)
type metrics struct {
	reg       *prometheus.Registry
	decisions *prometheus.CounterVec
	policy    *prometheus.CounterVec
	sync      *prometheus.HistogramVec
	limiters  []string
}

const metricNS = "edgelimit_edge_"

func newMetrics(h *Host) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricNS + "decisions_total",
		Help: "Decisions by binding limiter and result (allowed, denied)."}, []string{"limiter", "result"})
	m.policy = prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricNS + "fail_policy_decisions_total",
		Help: "Decisions taken while the isolate's view was stale, by binding limiter, its fail policy and result."},
		[]string{"limiter", "policy", "result"})
	m.sync = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metricNS + "sync_seconds",
		Help:    "Round trip of one sync with the coordinator, seconds, by result (ok, error).",
		Buckets: prometheus.ExponentialBuckets(250e-6, 2, 16)}, []string{"result"})
	m.reg.MustRegister(m.decisions, m.policy, m.sync,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: metricNS + "sync_errors_total",
			Help: "Failed sync attempts (transport errors, timeouts, refusals, replies the module rejected)."},
			func() float64 { return float64(h.errs.Load()) }),
		slotCollector{h})
	if h.opts.Coordinator != "" {
		m.reg.MustRegister(coordinatorCollector{h})
	}
	if h.offset != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricNS + "clock_offset_seconds",
			Help: "What the host adds to its own clock to run on the coordinator's, seconds (learned from its answers)."},
			func() float64 { return float64(h.offset.Offset()) / 1e9 }))
	}
	for i, l := range h.opts.Config.Limiters {
		m.limiters = append(m.limiters, l.Name)
		for _, r := range []string{"allowed", "denied"} {
			m.decisions.WithLabelValues(l.Name, r)
			m.policy.WithLabelValues(l.Name, h.policies[i].String(), r)
		}
	}
	for _, r := range []string{"ok", "error"} {
		m.sync.WithLabelValues(r)
	}
	return m
}

// decided counts a decision.
func (m *metrics) decided(h *Host, d Decision) {
	r := "allowed"
	if !d.Allowed {
		r = "denied"
	}
	name := m.limiters[d.Limiter]
	m.decisions.WithLabelValues(name, r).Inc()
	if d.Stale {
		m.policy.WithLabelValues(name, d.Policy.String(), r).Inc()
	}
}

// handler serves the registry.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// timedTransport observes the round trip of every sync (a measured
// duration, on the process's monotonic clock, not the host's Clock).
type timedTransport struct {
	tr syncloop.Transport
	m  *metrics
}

// Sync implements syncloop.Transport.
func (t timedTransport) Sync(ctx context.Context, batch, dst []byte) ([]byte, error) {
	start := time.Now()
	r, err := t.tr.Sync(ctx, batch, dst)
	res := "ok"
	if err != nil {
		res = "error"
	}
	t.m.sync.WithLabelValues(res).Observe(time.Since(start).Seconds())
	return r, err
}

// Ready implements syncloop.Reader when the transport does.
func (t timedTransport) Ready(ctx context.Context) error {
	if rd, ok := t.tr.(syncloop.Reader); ok {
		return rd.Ready(ctx)
	}
	return nil
}

// slotCollector exports the per-isolate series at scrape time.
type slotCollector struct{ h *Host }

var (
	descViewAge   = prometheus.NewDesc(metricNS+"view_age_seconds", "Time since the isolate's last good sync (or since it had nothing to sync), seconds.", []string{"isolate"}, nil)
	descStale     = prometheus.NewDesc(metricNS+"view_stale", "1 while the isolate's view is stale and the fail policies apply.", []string{"isolate"}, nil)
	descUnacked   = prometheus.NewDesc(metricNS+"unacked_cost", "Cost in the batch the isolate sent and the coordinator has not acknowledged.", []string{"isolate"}, nil)
	descUnsynced  = prometheus.NewDesc(metricNS+"unsynced_cost", "Cost the isolate admitted that the coordinator has not acknowledged (buffered while it is away).", []string{"isolate"}, nil)
	descRestarts  = prometheus.NewDesc(metricNS+"isolate_restarts_total", "Restarts of the isolate after a trap.", []string{"isolate"}, nil)
	descKeys      = prometheus.NewDesc(metricNS+"module_keys", "Keys the isolate's module tracks.", []string{"isolate"}, nil)
	descEvicted   = prometheus.NewDesc(metricNS+"module_evicted_unsynced_total", "Cost the module lost by evicting keys before they synced.", []string{"isolate"}, nil)
	descModuleErr = prometheus.NewDesc(metricNS+"module_errors_total", "Module calls that returned an error.", []string{"isolate"}, nil)
	descUpPauses  = prometheus.NewDesc(metricNS+"upstream_pauses_total", "Key pauses an upstream's answer began or extended, observed here or heard from the coordinator.", []string{"isolate"}, nil)
	descUpOpens   = prometheus.NewDesc(metricNS+"upstream_circuit_opens_total", "Times a key's circuit opened in the isolate.", []string{"isolate"}, nil)
	descUpIgnored = prometheus.NewDesc(metricNS+"upstream_ignored_total", "Upstream header values ignored (unreadable, out of range, dates in the past).", []string{"isolate"}, nil)
)

// Describe implements prometheus.Collector.
func (c slotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descViewAge, descStale, descUnacked, descUnsynced, descRestarts, descKeys, descEvicted, descModuleErr, descUpPauses, descUpOpens, descUpIgnored} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c slotCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.h.opts.Clock.Now()
	for _, s := range c.h.slots {
		id := strconv.Itoa(s.idx)
		if s.loop != nil {
			ch <- prometheus.MustNewConstMetric(descViewAge, prometheus.GaugeValue, float64(now-s.lastOK.Load())/1e9, id)
			stale := 0.0
			if s.stale(now, int64(c.h.opts.Sync.StaleAfter)) {
				stale = 1
			}
			ch <- prometheus.MustNewConstMetric(descStale, prometheus.GaugeValue, stale, id)
			ch <- prometheus.MustNewConstMetric(descUnacked, prometheus.GaugeValue, float64(s.unacked.Load()), id)
		}
		s.mu.Lock()
		restarts := s.iso.Restarts()
		st, err := s.iso.Stats(context.Background())
		s.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(restarts), id)
		if err == nil {
			ch <- prometheus.MustNewConstMetric(descKeys, prometheus.GaugeValue, float64(st.Keys), id)
			ch <- prometheus.MustNewConstMetric(descUnsynced, prometheus.GaugeValue, float64(st.UnsyncedCost), id)
			ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, float64(st.EvictedUnsynced), id)
			ch <- prometheus.MustNewConstMetric(descModuleErr, prometheus.CounterValue, float64(st.Errors), id)
			ch <- prometheus.MustNewConstMetric(descUpPauses, prometheus.CounterValue, float64(st.UpstreamPauses), id)
			ch <- prometheus.MustNewConstMetric(descUpOpens, prometheus.CounterValue, float64(st.CircuitOpens), id)
			ch <- prometheus.MustNewConstMetric(descUpIgnored, prometheus.CounterValue, float64(st.UpstreamIgnored), id)
		}
	}
}
