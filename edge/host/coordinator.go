package host

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// coordinatorCollector exports, at scrape time, which coordinators of the
// --coordinator list the host's isolates sync to and how often they moved
// on (each isolate's syncloop.HTTPTransport prefers the coordinator its id
// hashes to, fails over to the next one when one cannot be reached or
// answers 502, 503 or 504, and returns to its own when it answers again):
//
//	edgelimit_edge_coordinator_failovers_total   counter, summed over the isolates
//	edgelimit_edge_coordinator_info{url}         isolates syncing to url (URLs in use only)
type coordinatorCollector struct{ h *Host }

var (
	descFailovers = prometheus.NewDesc(metricNS+"coordinator_failovers_total",
		"Times the syncs moved on to the next coordinator of the list (the one in use could not be reached, or answered 502, 503 or 504).", nil, nil)
	descCoordinator = prometheus.NewDesc(metricNS+"coordinator_info",
		"Isolates whose syncs go to the coordinator at url (only URLs in use are exported).", []string{"url"}, nil)
)

// Describe implements prometheus.Collector.
func (c coordinatorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descFailovers
	ch <- descCoordinator
}

// Collect implements prometheus.Collector.
func (c coordinatorCollector) Collect(ch chan<- prometheus.Metric) {
	if c.h.opts.Coordinator == "" {
		return
	}
	var failovers int64
	var urls []string
	count := map[string]int{}
	for _, s := range c.h.slots {
		if s.tr == nil {
			continue
		}
		failovers += s.tr.Failovers()
		u := s.tr.Current()
		if count[u] == 0 {
			urls = append(urls, u)
		}
		count[u]++
	}
	ch <- prometheus.MustNewConstMetric(descFailovers, prometheus.CounterValue, float64(failovers))
	for _, u := range urls {
		ch <- prometheus.MustNewConstMetric(descCoordinator, prometheus.GaugeValue, float64(count[u]), u)
	}
}

// coordinatorsInUse returns the URLs the isolates sync to, comma-separated
// in the order of the --coordinator list, and their failovers summed.
func (h *Host) coordinatorsInUse() (string, int64) {
	var failovers int64
	inUse := map[string]bool{}
	for _, s := range h.slots {
		if s.tr != nil {
			failovers += s.tr.Failovers()
			inUse[s.tr.Current()] = true
		}
	}
	var urls []string
	for _, u := range strings.Split(h.opts.Coordinator, ",") {
		if u = strings.TrimRight(strings.TrimSpace(u), "/"); inUse[u] {
			urls = append(urls, u)
			delete(inUse, u)
		}
	}
	return strings.Join(urls, ","), failovers
}
