package host

import (
	"github.com/prometheus/client_golang/prometheus"
)

// coordinatorCollector exports, at scrape time, which coordinator of the
// --coordinator list the host's syncs go to and how often they moved on
// (syncloop.HTTPTransport fails over to the next one when one cannot be
// reached or answers 502, 503 or 504; syncloop.HTTPTransport):
//
//	edgelimit_edge_coordinator_failovers_total   counter
//	edgelimit_edge_coordinator_info{url}         1, the URL in use
type coordinatorCollector struct{ h *Host }

var (
	descFailovers = prometheus.NewDesc(metricNS+"coordinator_failovers_total",
		"Times the syncs moved on to the next coordinator of the list (the one in use could not be reached, or answered 502, 503 or 504).", nil, nil)
	descCoordinator = prometheus.NewDesc(metricNS+"coordinator_info",
		"1, labelled with the URL of the coordinator the syncs go to.", []string{"url"}, nil)
)

// Describe implements prometheus.Collector.
func (c coordinatorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descFailovers
	ch <- descCoordinator
}

// Collect implements prometheus.Collector.
func (c coordinatorCollector) Collect(ch chan<- prometheus.Metric) {
	tr := c.h.probe
	if tr == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descFailovers, prometheus.CounterValue, float64(tr.Failovers()))
	ch <- prometheus.MustNewConstMetric(descCoordinator, prometheus.GaugeValue, 1, tr.Current())
}
