package core

// Admit records that the host admitted cost of (lim, key) at now (ns)
// without the module's decision: a fail policy (edge/failpolicy, Open)
// that admits in the module's place while the coordinator is out of reach
// and the module denies for want of a lease. The cost is counted like an
// admission of Decide (unsynced cost, reported with the next batch), so
// the coordinator counts it once it is back; a leased key's lease shrinks
// by it (below 0 it grants nothing). Nothing is checked against the limit.
// cost 0 does nothing.
func (c *Core) Admit(lim int, key []byte, cost, now int64) error {
	if err := c.checkArgs(lim, key, cost, now); err != nil {
		c.stats.Errors++
		return err
	}
	c.see(now)
	if cost == 0 {
		return nil
	}
	idx := c.lookup(lim, key, now)
	e := c.tab.at(idx)
	now = c.clamp(e, now)
	c.advance(idx, e, now)
	c.record(lim, idx, cost, now, true, false)
	return nil
}
