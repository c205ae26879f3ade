package core

// A request the module answers SyncRetry asks for a lease: its cost goes
// into the next batch (or an amendment of the one in flight) as demand the
// coordinator reserves budget for. The host holds it for a reply or two
// (edge/syncloop.Retry) and decides it again; when the last decision again
// answers SyncRetry, the host denies it and holds it no longer, but its
// ask, recorded by that decision, would still leave with the next batch:
// the coordinator would reserve a unit for a request gone, which strands
// in the window (a key at its limit loses it) and costs a batch where
// nothing else is to report. Withdraw takes such an ask back.

// heldAsk is the ask one check of a decision recorded for a held request.
type heldAsk struct {
	ref
	ask  int64 // what it added to the key's demand and unsent asks
	cost int64 // the request's cost
}

// keepAsk remembers the ask of the decision being recorded (record), for
// Withdraw.
func (c *Core) keepAsk(idx int32, gen uint32, ask, cost int64) {
	if c.nAsks < len(c.asks) {
		c.asks[c.nAsks] = heldAsk{ref{idx, gen}, ask, cost}
		c.nAsks++
	}
}

// Withdraw tells the module that the host will not hold the request its
// last decision answered SyncRetry: that decision's asks, as far as no
// batch or amendment has carried them yet, are taken back, and the request
// counts as a final denial (wire.Batch.Denials) of its strict checks. A
// host calls it when it denies a held request for good (its retries are
// used up), right after that decision. It takes nothing back after any
// other decision, nor what a batch has carried; what an amendment of the
// batch in flight carried, the next batch does not ask for again.
func (c *Core) Withdraw() {
	for _, a := range c.asks[:c.nAsks] {
		e := c.tab.at(a.idx)
		if e.gen != a.gen || !c.lims[e.lim].strict || e.aux <= 0 {
			continue
		}
		s := c.tab.lease(e)
		if s.unsentSeq == c.seq {
			// Not sent yet: it leaves no trace.
			k := min64(min64(a.ask, s.unsent-s.amended), e.demand)
			// Carried by an amendment of the batch in flight: the next
			// batch would ask for it again (demand counts every ask since
			// the last batch); it asks for what is still held only.
			k2 := min64(min64(a.ask-max64(k, 0), s.amended), e.demand-max64(k, 0))
			if k > 0 {
				s.unsent -= k
				e.demand -= k
			}
			if k2 > 0 {
				s.amended -= k2
				s.unsent -= k2
				e.demand -= k2
			}
		}
		if a.cost > 0 {
			e.den = addSat(e.den, a.cost)
			c.markDirty(a.idx, e)
		}
	}
	c.nAsks = 0
}
