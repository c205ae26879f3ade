package core

// A graceful stop gives budget back: Release makes the next batches carry
// every key holding a lease (with or without cost to report), the last of
// them marked wire.Batch.End, after which the coordinator reserves nothing
// more for this isolate and the isolate admits nothing more under its
// leases. A host calls Release when it stops (SIGTERM, close()), then syncs
// until SyncOut returns nothing.

// Release starts a graceful stop (see above). The decisions after it still
// work, but a leased key asks for a new lease.
func (c *Core) Release() {
	c.ending, c.stopped = true, true
}

// dirtyLeased puts every key that holds a lease on the dirty list, so the
// last batch names it (the coordinator releases the leases of the batch's
// keys).
func (c *Core) dirtyLeased() {
	for i := 0; i < c.tab.n; i++ {
		e := c.tab.at(int32(i))
		if e.dirty() || !c.holdsLease(e) {
			continue
		}
		e.flags |= fDirty
		c.dirty = append(c.dirty, ref{int32(i), e.gen})
	}
}

// holdsLease reports whether e is a leased limiter's key holding a lease
// or a standing lease (what a graceful stop's last batch and a
// reincarnation's handover name).
func (c *Core) holdsLease(e *entry) bool {
	if !e.inUse() || !c.lims[e.lim].strict || e.aux <= 0 {
		return false
	}
	s := c.tab.lease(e)
	return s.hasLease || s.standA != 0
}

// dropLeases voids every lease this isolate holds (its last batch gives
// them back).
func (c *Core) dropLeases() {
	for i := 0; i < c.tab.n; i++ {
		e := c.tab.at(int32(i))
		if e.inUse() && c.lims[e.lim].strict && e.aux > 0 {
			s := c.tab.lease(e)
			s.lease, s.leaseGrant, s.standA, s.hasLease = 0, 0, 0, false
		}
	}
}
