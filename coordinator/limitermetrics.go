package coordinator

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgelimit/edgelimit/coordinator/dashboard"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// DefaultMaxTrackedKeys bounds the keys the per-limiter gauges remember
// (near or at the limit, paused, circuit open), over all limiters: 65536.
// Past it a new key is not tracked (the gauges undercount) and
// edgelimit_coordinator_keys_untracked_total counts each of its views.
const DefaultMaxTrackedKeys = 1 << 16

// limiterMetrics are the coordinator's per-limiter Prometheus series, kept
// as batches are merged (a merge.Observer beside the dashboard, so no
// scrape reads the store). Labels are limiter names only (the limiters of
// the configuration at start), never keys:
//
//	edgelimit_coordinator_admitted_total{limiter}     cost the isolates admitted (sum of the batches' Delta)
//	edgelimit_coordinator_denied_total{limiter}       cost the isolates refused for good (wire.Batch.EachDenial: their final denials; Demand - Delta from modules that do not report them)
//	edgelimit_coordinator_upstream_pauses_total{limiter}  pause signals isolates reported (an upstream asked them to back off)
//	edgelimit_coordinator_keys_near_limit{limiter}    keys using more than 80% of their limit now
//	edgelimit_coordinator_keys_at_limit{limiter}      keys using all of their limit now
//	edgelimit_coordinator_keys_paused{limiter}        keys under an upstream pause now
//	edgelimit_coordinator_keys_circuit_open{limiter}  keys whose fleet circuit is open now
//	edgelimit_coordinator_keys_untracked_total        views of keys the gauges could not track (DefaultMaxTrackedKeys reached)
//
// The counters are best effort like the dashboard's: a batch applied and
// then lost to a failed commit (its isolate retries it) is counted twice.
// A key's usage is computed at scrape time from its last view
// (dashboard.UsageOf), so a key leaves the gauges when its window ends or
// its bucket drains even if it never syncs again.
type limiterMetrics struct {
	mu        sync.Mutex
	now       func() int64
	lims      map[string]*limiterTrack
	order     []*limiterTrack // configuration order, for stable output
	tracked   int             // keys in every limiter's hot and up maps
	max       int
	untracked int64
}

// limiterTrack is what limiterMetrics keeps for one limiter.
type limiterTrack struct {
	cfg                      *wire.LimiterConfig
	admitted, denied, pauses int64
	hot                      map[string]hotKey // keys above NearLimitFraction at their last view
	up                       map[string]upKey  // keys paused or with an open circuit at their last view
}

// hotKey is the last global view of a key near its limit.
type hotKey struct{ window, count, prev, tat int64 }

// upKey is when a key's pause and open circuit end, coordinator ns.
type upKey struct{ pauseEnd, openEnd int64 }

var (
	descAdmitted = prometheus.NewDesc("edgelimit_coordinator_admitted_total",
		"Cost the isolates admitted, as they report it in their batches (the sum of Delta), by limiter.", []string{"limiter"}, nil)
	descDenied = prometheus.NewDesc("edgelimit_coordinator_denied_total",
		"Cost the isolates asked for and did not admit, as they report it: demand - admitted of each key-window in each batch, by limiter. "+
			"A request held for a sync (SyncRetry) and admitted after it counts once here as well as in admitted.", []string{"limiter"}, nil)
	descPauses = prometheus.NewDesc("edgelimit_coordinator_upstream_pauses_total",
		"Upstream pause signals the isolates reported (an upstream asked to back off, e.g. 429 with Retry-After), by limiter.", []string{"limiter"}, nil)
	descNear = prometheus.NewDesc("edgelimit_coordinator_keys_near_limit",
		"Keys using more than 80% of their limit now (as of their last sync), by limiter.", []string{"limiter"}, nil)
	descAt = prometheus.NewDesc("edgelimit_coordinator_keys_at_limit",
		"Keys using all of their limit now (as of their last sync), by limiter.", []string{"limiter"}, nil)
	descPaused = prometheus.NewDesc("edgelimit_coordinator_keys_paused",
		"Keys under an upstream pause now, by limiter.", []string{"limiter"}, nil)
	descOpen = prometheus.NewDesc("edgelimit_coordinator_keys_circuit_open",
		"Keys whose fleet-wide upstream circuit is open now, by limiter.", []string{"limiter"}, nil)
	descUntracked = prometheus.NewDesc("edgelimit_coordinator_keys_untracked_total",
		"Views of keys near their limit, paused or with an open circuit that the per-limiter gauges could not track (bound reached: the gauges undercount), counted per merged view.", nil, nil)
)

// newLimiterMetrics returns the per-limiter series of the limiters of cfg,
// tracking at most maxKeys keys, reading the time from now (ns).
func newLimiterMetrics(cfg wire.Config, now func() int64, maxKeys int) *limiterMetrics {
	lm := &limiterMetrics{now: now, lims: map[string]*limiterTrack{}, max: maxKeys}
	for i := range cfg.Limiters {
		l := &cfg.Limiters[i]
		t := &limiterTrack{cfg: l, hot: map[string]hotKey{}, up: map[string]upKey{}}
		lm.lims[l.Name] = t
		lm.order = append(lm.order, t)
	}
	return lm
}

// Applied implements merge.Observer: it counts what b reports and notes
// the keys of rp near their limit or paused.
func (lm *limiterMetrics) Applied(b *wire.Batch, rp *wire.Reply, now int64) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	for i := range b.Entries {
		e := &b.Entries[i]
		if l := lm.lims[e.Limiter]; l != nil {
			l.admitted = dashboard.AddTotal(l.admitted, e.Delta)
		}
	}
	b.EachDenial(func(limiter, _ string, _, cost int64) {
		if l := lm.lims[limiter]; l != nil {
			l.denied = dashboard.AddTotal(l.denied, cost)
		}
	})
	for i := range b.Signals {
		if l := lm.lims[b.Signals[i].Limiter]; l != nil && b.Signals[i].Pause > 0 {
			l.pauses++
		}
	}
	for i := range rp.Entries {
		v := &rp.Entries[i]
		l := lm.lims[v.Limiter]
		if l == nil {
			continue
		}
		u := dashboard.UsageOf(l.cfg, v.Key, v.Window, v.Count, v.Prev, v.TAT, now)
		h := hotKey{v.Window, v.Count, v.Prev, v.TAT}
		if u.Used() > dashboard.NearLimitFraction {
			putKey(lm, l.hot, v.Key, h)
		} else if _, ok := l.hot[v.Key]; ok {
			delete(l.hot, v.Key)
			lm.tracked--
		}
	}
	for i := range rp.Upstream {
		v := &rp.Upstream[i]
		l := lm.lims[v.Limiter]
		if l == nil {
			continue
		}
		var k upKey
		if v.Pause > 0 {
			k.pauseEnd = now + v.Pause
		}
		if v.Circuit == wire.CircuitOpen && v.Open > 0 {
			k.openEnd = now + v.Open
		}
		if k != (upKey{}) {
			putKey(lm, l.up, v.Key, k)
		} else if _, ok := l.up[v.Key]; ok {
			delete(l.up, v.Key)
			lm.tracked--
		}
	}
}

// putKey sets m[key] = v (m a map of lm), a new key only within lm's bound.
func putKey[V any](lm *limiterMetrics, m map[string]V, key string, v V) {
	if _, ok := m[key]; ok {
		m[key] = v
		return
	}
	if lm.tracked >= lm.max {
		lm.untracked++
		return
	}
	m[string([]byte(key))] = v // do not pin the batch's memory
	lm.tracked++
}

// setLimits makes cfg (the running configuration with the limits in force,
// not changed afterwards) the limits the gauges measure usage against.
func (lm *limiterMetrics) setLimits(cfg wire.Config) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	for i := range cfg.Limiters {
		if l := lm.lims[cfg.Limiters[i].Name]; l != nil {
			l.cfg = &cfg.Limiters[i]
		}
	}
}

// forget drops (limiter, key) from the gauges after a reset.
func (lm *limiterMetrics) forget(limiter, key string) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	l := lm.lims[limiter]
	if l == nil {
		return
	}
	if _, ok := l.hot[key]; ok {
		delete(l.hot, key)
		lm.tracked--
	}
	if _, ok := l.up[key]; ok {
		delete(l.up, key)
		lm.tracked--
	}
}

// Describe implements prometheus.Collector.
func (lm *limiterMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAdmitted, descDenied, descPauses, descNear, descAt, descPaused, descOpen, descUntracked} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the counters, and the gauges
// from each tracked key's last view at the time of the scrape (keys that
// no longer count are dropped).
func (lm *limiterMetrics) Collect(ch chan<- prometheus.Metric) {
	now := lm.now()
	lm.mu.Lock()
	defer lm.mu.Unlock()
	for _, l := range lm.order {
		var near, at, paused, open int
		for k, h := range l.hot {
			u := dashboard.UsageOf(l.cfg, k, h.window, h.count, h.prev, h.tat, now)
			if u.Used() <= dashboard.NearLimitFraction {
				delete(l.hot, k)
				lm.tracked--
				continue
			}
			near++
			if u.Count >= u.Limit {
				at++
			}
		}
		for k, u := range l.up {
			if u.pauseEnd <= now && u.openEnd <= now {
				delete(l.up, k)
				lm.tracked--
				continue
			}
			if u.pauseEnd > now {
				paused++
			}
			if u.openEnd > now {
				open++
			}
		}
		name := l.cfg.Name
		ch <- prometheus.MustNewConstMetric(descAdmitted, prometheus.CounterValue, float64(l.admitted), name)
		ch <- prometheus.MustNewConstMetric(descDenied, prometheus.CounterValue, float64(l.denied), name)
		ch <- prometheus.MustNewConstMetric(descPauses, prometheus.CounterValue, float64(l.pauses), name)
		ch <- prometheus.MustNewConstMetric(descNear, prometheus.GaugeValue, float64(near), name)
		ch <- prometheus.MustNewConstMetric(descAt, prometheus.GaugeValue, float64(at), name)
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, float64(paused), name)
		ch <- prometheus.MustNewConstMetric(descOpen, prometheus.GaugeValue, float64(open), name)
	}
	ch <- prometheus.MustNewConstMetric(descUntracked, prometheus.CounterValue, float64(lm.untracked))
}
