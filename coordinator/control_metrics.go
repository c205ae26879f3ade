package coordinator

import "github.com/prometheus/client_golang/prometheus"

// controlMetrics are the live control's Prometheus series (control.go),
// read from the state in force at each scrape:
//
//	edgelimit_coordinator_limit{limiter}               the limiter's limit in force (after run-time changes)
//	edgelimit_coordinator_limits_generation            generation of the limits in force (1: the configuration's)
//	edgelimit_coordinator_fleet_paused{limiter}        1 while the limiter is paused fleet-wide, else 0
//	edgelimit_coordinator_fleet_paused_keys{limiter}   keys of the limiter paused fleet-wide one by one
type controlMetrics struct{ c *Coordinator }

var (
	descLimit = prometheus.NewDesc("edgelimit_coordinator_limit",
		"The limiter's limit in force, after run-time changes (the control API, a reload of the configuration).", []string{"limiter"}, nil)
	descLimitsGen = prometheus.NewDesc("edgelimit_coordinator_limits_generation",
		"Generation of the limits in force: 1 for the configuration, one more per change of a limit or override.", nil, nil)
	descFleetPaused = prometheus.NewDesc("edgelimit_coordinator_fleet_paused",
		"1 while the limiter is paused fleet-wide by an operator (the kill switch), else 0.", []string{"limiter"}, nil)
	descFleetPausedKeys = prometheus.NewDesc("edgelimit_coordinator_fleet_paused_keys",
		"Keys of the limiter paused fleet-wide one by one by an operator.", []string{"limiter"}, nil)
)

// Describe implements prometheus.Collector.
func (cm controlMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLimit, descLimitsGen, descFleetPaused, descFleetPausedKeys} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (cm controlMetrics) Collect(ch chan<- prometheus.Metric) {
	ct := cm.c.ctl
	g := ct.limits.Load()
	now := cm.c.opts.Clock.Now()
	ps := ct.active.Load()
	ch <- prometheus.MustNewConstMetric(descLimitsGen, prometheus.GaugeValue, float64(g.Gen))
	for i := range g.Config.Limiters {
		name := g.Config.Limiters[i].Name
		paused, keys := 0.0, 0
		if ps != nil {
			if ps.limiters[name] > now {
				paused = 1
			}
			for k, until := range ps.keys {
				if k[0] == name && until > now {
					keys++
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(g.Config.Limiters[i].Limit), name)
		ch <- prometheus.MustNewConstMetric(descFleetPaused, prometheus.GaugeValue, paused, name)
		ch <- prometheus.MustNewConstMetric(descFleetPausedKeys, prometheus.GaugeValue, float64(keys), name)
	}
}
