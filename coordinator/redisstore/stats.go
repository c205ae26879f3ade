package redisstore

import (
	"sync/atomic"
	"time"
)

// Stats are the store's counters since Open (for the coordinator's
// /metrics).
type Stats struct {
	// RoundTrips counts round trips to Redis (a pipeline to one master, a
	// command, a WAIT), RoundTripTime their total duration: the mean is
	// RoundTripTime / RoundTrips.
	RoundTrips    int64
	RoundTripTime time.Duration
	// Errors counts failed round trips (each attempt), Retries the attempts
	// made again after one failed, Outages the runs of failures (each
	// logged once).
	Errors, Retries, Outages int64
	// SlotReloads counts reloads of the slot map after failures (at most
	// one per 50 ms); Failovers counts changes of the set of masters seen
	// by Probe.
	SlotReloads, Failovers int64
	// WaitShortfalls counts WAITs answered by fewer replicas than
	// Options.Wait within Options.WaitTimeout; WaitDegraded those of them
	// accepted anyway (Options.WaitDegraded).
	WaitShortfalls, WaitDegraded int64
}

type stats struct {
	roundTrips, roundTripNs      atomic.Int64
	errors, retries, outages     atomic.Int64
	slotReloads, failovers       atomic.Int64
	waitShortfalls, waitDegraded atomic.Int64
}

// roundTrip counts one round trip that started at start.
func (s *stats) roundTrip(start time.Time) {
	s.roundTrips.Add(1)
	s.roundTripNs.Add(int64(time.Since(start)))
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	t := &s.stats
	return Stats{RoundTrips: t.roundTrips.Load(), RoundTripTime: time.Duration(t.roundTripNs.Load()),
		Errors: t.errors.Load(), Retries: t.retries.Load(), Outages: t.outages.Load(),
		SlotReloads: t.slotReloads.Load(), Failovers: t.failovers.Load(),
		WaitShortfalls: t.waitShortfalls.Load(), WaitDegraded: t.waitDegraded.Load()}
}
