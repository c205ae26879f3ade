package coordinator

import (
	"github.com/edgelimit/edgelimit/coordinator/redisstore"

	"github.com/prometheus/client_golang/prometheus"
)

// Redis series, registered when the store is a redisstore.Store (shared
// mode over Redis):
//
//	edgelimit_coordinator_redis_round_trips_total        round trips to Redis (a pipeline to one master, a command, a WAIT)
//	edgelimit_coordinator_redis_round_trip_seconds_total their total duration, seconds (divided by the above: the mean)
//	edgelimit_coordinator_redis_errors_total             failed round trips (each attempt)
//	edgelimit_coordinator_redis_retries_total            round trips tried again after a failure (failover, CLUSTERDOWN, MOVED)
//	edgelimit_coordinator_redis_outages_total            runs of failures (each logged once, with its end)
//	edgelimit_coordinator_redis_slot_reloads_total       slot map reloads after failures
//	edgelimit_coordinator_redis_failovers_total          changes of the set of masters seen by the health probe
//	edgelimit_coordinator_redis_wait_shortfalls_total    WAITs answered by fewer replicas than --redis-wait
//	edgelimit_coordinator_redis_wait_degraded_total      of those, writes accepted anyway (--redis-wait-degraded)

// redisStats is a store with redisstore.Store's counters.
type redisStats interface {
	Stats() redisstore.Stats
}

// redisCollectors returns the Redis series of c's store, or none when it
// is not a Redis store.
func redisCollectors(c *Coordinator) []prometheus.Collector {
	rs, ok := c.store.(redisStats)
	if !ok {
		return nil
	}
	const ns = "edgelimit_coordinator_redis_"
	counter := func(name, help string, f func(s redisstore.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: ns + name, Help: help}, func() float64 {
			return f(rs.Stats())
		})
	}
	return []prometheus.Collector{
		counter("round_trips_total", "Round trips to Redis (a pipeline to one master, a command, a WAIT).",
			func(s redisstore.Stats) float64 { return float64(s.RoundTrips) }),
		counter("round_trip_seconds_total", "Total duration of the round trips to Redis, seconds.",
			func(s redisstore.Stats) float64 { return s.RoundTripTime.Seconds() }),
		counter("errors_total", "Failed round trips to Redis (each attempt).",
			func(s redisstore.Stats) float64 { return float64(s.Errors) }),
		counter("retries_total", "Round trips tried again after a failure (failover, CLUSTERDOWN, MOVED).",
			func(s redisstore.Stats) float64 { return float64(s.Retries) }),
		counter("outages_total", "Runs of failed round trips (each logged once, with its end).",
			func(s redisstore.Stats) float64 { return float64(s.Outages) }),
		counter("slot_reloads_total", "Reloads of the cluster's slot map after failures.",
			func(s redisstore.Stats) float64 { return float64(s.SlotReloads) }),
		counter("failovers_total", "Changes of the set of masters seen by the health probe.",
			func(s redisstore.Stats) float64 { return float64(s.Failovers) }),
		counter("wait_shortfalls_total", "WAITs answered by fewer replicas than --redis-wait.",
			func(s redisstore.Stats) float64 { return float64(s.WaitShortfalls) }),
		counter("wait_degraded_total", "WAIT shortfalls accepted anyway (--redis-wait-degraded).",
			func(s redisstore.Stats) float64 { return float64(s.WaitDegraded) }),
	}
}
