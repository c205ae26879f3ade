package sim

import "math/rand/v2"

// network is the one model of the isolate-coordinator network: every
// message (a batch, a reply, a central round trip's two halves) takes one
// leg, with the scenario's latency, loss and partitions, and a request
// waits at most the timeout for its answer.
type network struct {
	lat     latency
	rng     *rand.Rand
	loss    float64
	timeout int64
	parts   []partition
	// byLocation: a node is a location's counter, cut off only by
	// partitions of its location.
	byLocation bool
}

type partition struct {
	iso, loc   int // -1 when not the target kind
	start, end int64
}

func newNetwork(sc *Scenario, seed uint64, byLocation bool) *network {
	n := &network{lat: newLatency(&sc.Network), rng: rand.New(rand.NewPCG(seed, 0x2e7)), loss: sc.Network.Loss,
		timeout: int64(sc.Network.Timeout), byLocation: byLocation}
	for _, p := range sc.Network.Partitions {
		q := partition{iso: -1, loc: -1, start: int64(p.Start), end: int64(p.Start + p.Duration)}
		if p.Isolate != nil {
			q.iso = *p.Isolate
		} else {
			q.loc = *p.Location
		}
		n.parts = append(n.parts, q)
	}
	return n
}

// leg sends one message between node (index iso, location loc) and the
// coordinator at now: it returns the one-way delay and whether the message
// arrives (it is not lost, and the node is not cut off when it leaves or
// when it arrives).
func (n *network) leg(iso, loc int, now int64) (delay int64, ok bool) {
	delay = n.lat.sample(n.rng)
	lost := n.loss > 0 && n.rng.Float64() < n.loss
	return delay, !lost && !n.cut(iso, loc, now) && !n.cut(iso, loc, now+delay)
}

// roundTrip sends a request and its answer at now: the time until the
// answer (or the timeout) and whether it came within the timeout.
func (n *network) roundTrip(iso, loc int, now int64) (took int64, ok bool) {
	d1, ok1 := n.leg(iso, loc, now)
	if !ok1 {
		return n.timeout, false
	}
	d2, ok2 := n.leg(iso, loc, now+d1)
	if !ok2 || d1+d2 > n.timeout {
		return n.timeout, false
	}
	return d1 + d2, true
}

// cut reports whether node (iso, loc) is partitioned from the coordinator
// at now.
func (n *network) cut(iso, loc int, now int64) bool {
	for i := range n.parts {
		p := &n.parts[i]
		if now < p.start || now >= p.end {
			continue
		}
		if p.loc >= 0 && p.loc == loc {
			return true
		}
		if p.iso >= 0 && !n.byLocation && p.iso == iso {
			return true
		}
	}
	return false
}
