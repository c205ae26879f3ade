package coordinator

import (
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Prometheus series of one Coordinator, in its own registry
// (served by Handler at GET /metrics):
//
//	edgelimit_coordinator_syncs_total                batches applied
//	edgelimit_coordinator_duplicates_dropped_total   retries of an isolate's last applied batch, not applied again
//	edgelimit_coordinator_seq_refused_total          batches refused for their Seq (stale, gap, conflict: HTTP 409)
//	edgelimit_coordinator_deltas_applied_total       entries applied
//	edgelimit_coordinator_deltas_stale_total         windowed entries older than W-1, dropped
//	edgelimit_coordinator_gc_deleted_total           records deleted by GC
//	edgelimit_coordinator_commit_seconds             histogram of synced commit latency
//	edgelimit_coordinator_group_requests             histogram of requests per group commit
//	edgelimit_coordinator_checkpoint_seconds         histogram of checkpoint commit latency
//	edgelimit_coordinator_checkpoints_total          checkpoints committed
//	edgelimit_coordinator_log_replayed_total         log records replayed (crash or failed commit)
//	edgelimit_coordinator_keys_cached                key states in memory
//	edgelimit_coordinator_leases_outstanding         sum of active strict leases (cost units, cached keys)
//	edgelimit_coordinator_request_errors_total{kind} rejected or failed HTTP requests
//	edgelimit_coordinator_entries_uncounted_total{reason}  batch items of limiters not counted: forbidden, unknown_limiter, period_mismatch (uncounted.go)
//	edgelimit_coordinator_store_healthy              1 while the store works, 0 while commits fail or it reports background errors (/healthz 503)
//	edgelimit_coordinator_store_background_errors_total  failed flushes and compactions reported by Pebble
//	edgelimit_coordinator_store_failing_seconds      how long the store has been failing (commits or background work), 0 while it works
//
// and the per-limiter series of limitermetrics.go (admitted, denied,
// upstream pauses; keys near or at the limit, paused, circuit open).
type metrics struct {
	reg    *prometheus.Registry
	lim    *limiterMetrics // per-limiter series, a merge.Observer
	commit prometheus.Histogram
	group  prometheus.Histogram
	ckpt   prometheus.Histogram
	errors *prometheus.CounterVec
	// uncounted: batch items taken out, by reason (uncounted.go)
	uncounted *prometheus.CounterVec
}

func newMetrics(c *Coordinator) *metrics {
	const ns = "edgelimit_coordinator_"
	mt := &metrics{reg: prometheus.NewRegistry(),
		lim: newLimiterMetrics(c.opts.Config, c.opts.Clock.Now, DefaultMaxTrackedKeys)}
	mt.commit = prometheus.NewHistogram(prometheus.HistogramOpts{Name: ns + "commit_seconds",
		Help:    "Latency of one synced group commit, seconds.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16)})
	mt.group = prometheus.NewHistogram(prometheus.HistogramOpts{Name: ns + "group_requests",
		Help: "Requests merged into one group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)})
	mt.ckpt = prometheus.NewHistogram(prometheus.HistogramOpts{Name: ns + "checkpoint_seconds",
		Help:    "Latency of one checkpoint commit (states logged since the previous one written to their records), seconds.",
		Buckets: prometheus.ExponentialBuckets(1e-3, 2, 14)})
	mt.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "request_errors_total",
		Help: "HTTP requests rejected or failed, by kind."}, []string{"kind"})
	// counter exports one field of the Merger's stats.
	counter := func(name, help string, f func(s merge.MergeStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: ns + name, Help: help}, func() float64 {
			return float64(f(c.mergeStats()))
		})
	}
	mt.uncounted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: ns + "entries_uncounted_total",
		Help: "Batch entries, signals, denials and asks of limiters the coordinator does not count for the batch's token (forbidden) or does not run (unknown_limiter), or that name windows of another period (period_mismatch); the rest of the batch is applied."}, []string{"reason"})
	for _, r := range []string{uncountedForbidden, uncountedUnknown} {
		mt.uncounted.WithLabelValues(r)
	}
	mt.reg.MustRegister(mt.commit, mt.group, mt.ckpt, mt.errors, mt.lim, mt.uncounted,
		counter("checkpoints_total", "Checkpoints committed.", func(s merge.MergeStats) int64 { return s.Checkpoints }),
		counter("log_replayed_total", "Log records replayed into the records (after a crash or a failed commit).", func(s merge.MergeStats) int64 { return s.Replayed }),
		counter("syncs_total", "Sync batches applied.", func(s merge.MergeStats) int64 { return s.Batches }),
		counter("duplicates_dropped_total", "Retries of an isolate's last applied batch, not applied again.", func(s merge.MergeStats) int64 { return s.Duplicates }),
		counter("amendments_total", "Sync batches amended in flight with asks for held requests (wire/amend.go).", func(s merge.MergeStats) int64 { return s.Amendments }),
		counter("asks_granted_total", "Cost units granted to the asks of amendments that retried an applied batch.", func(s merge.MergeStats) int64 { return s.AsksGranted }),
		counter("seq_refused_total", "Sync batches refused for their sequence number (stale, gap, conflict, identity).", func(s merge.MergeStats) int64 { return s.SeqRefused }),
		counter("lease_handovers_total", "Key leases a new incarnation of an isolate took over from the incarnation it left (merge/handover.go).", func(s merge.MergeStats) int64 { return s.Handovers }),
		counter("lease_handovers_refused_total", "Sync batches naming a predecessor incarnation without its secret, or one unknown: nothing handed over.", func(s merge.MergeStats) int64 { return s.HandoversRefused }),
		counter("upstream_signals_ignored_total", "Upstream signals for limiters without an upstream configuration, ignored.", func(s merge.MergeStats) int64 { return s.SignalsIgnored }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "store_healthy",
			Help: "1 while the store works; 0 while commits fail or it reports background errors (then /healthz and sync answer 503)."},
			func() float64 {
				if c.healthy() != nil {
					return 0
				}
				return 1
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: ns + "store_background_errors_total",
			Help: "Background errors (failed flushes and compactions) reported by the store."},
			func() float64 {
				if hr, ok := c.store.(HealthReporter); ok {
					return float64(hr.BackgroundErrors())
				}
				return 0
			}),
		counter("deltas_applied_total", "Batch entries applied.", func(s merge.MergeStats) int64 { return s.DeltasApplied }),
		counter("deltas_stale_total", "Windowed entries older than the previous window, dropped.", func(s merge.MergeStats) int64 { return s.DeltasStale }),
		counter("records_corrupt_total", "Key records that did not decode, started again (their counts unknown).", func(s merge.MergeStats) int64 { return s.CorruptRecords }),
		counter("records_refit_total", "Key records written under another period (windows ahead of the clock, a TAT past the bucket's reach), fitted to the configuration.", func(s merge.MergeStats) int64 { return s.RecordsRefit }),
		counter("gc_deleted_total", "Records deleted by GC.", func(s merge.MergeStats) int64 { return s.GCDeleted }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "keys_cached", Help: "Key states held in memory."},
			func() float64 {
				var n int
				c.withMerger(func(m *merge.Merger) { n = m.CachedKeys() })
				return float64(n)
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "leases_outstanding",
			Help: "Sum of active strict leases over the cached keys, cost units."},
			func() float64 {
				var n int64
				now := c.opts.Clock.Now()
				c.withMerger(func(m *merge.Merger) { n = m.LeasesOutstanding(now) })
				return float64(n)
			}),
	)
	// The store's failures (health.go).
	mt.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: ns + "store_failing_seconds",
		Help: "Seconds the store has been failing (failed commits, or failed flushes and compactions, retried with backoff); 0 while it works."},
		func() float64 { return c.failingFor().Seconds() }))
	mt.reg.MustRegister(redisCollectors(c)...) // redismetrics.go
	for _, k := range errorKinds {
		mt.errors.WithLabelValues(k)
	}
	return mt
}

func (mt *metrics) observeCommit(d time.Duration, n int) {
	mt.commit.Observe(d.Seconds())
	mt.group.Observe(float64(n))
}

func (mt *metrics) observeCheckpoint(d time.Duration) {
	mt.ckpt.Observe(d.Seconds())
}
