package core

// Lapsed leases (strict windowed limiters). A lease lives for the life
// its reply told (wire.View.Life); past it the isolate admits nothing more
// under it, and the coordinator, which cannot tell whether a quiet
// isolate spent it, keeps what it held reserved, as spent, until its
// window ends. An isolate that goes quiet with units left (a burst, then
// nothing) thus stranded them for the rest of the window (a day for a
// daily limit), and the others' views counted them as admitted (Held).
// So a key whose lease lapses here with units left in the current window
// is named in the next batch (an entry of cost 0 and demand 0). The batch
// is cut after the lease was void on this isolate's clock, which the
// coordinator checks against the cut plus the life it told (its voidAt):
// it then knows the batch reports all that was admitted under the lease,
// and gives back the rest. The name is not urgent: it rides along with
// the next batch the isolate cuts, a heartbeat at the latest
// (wire.Config.Heartbeat; a Worker syncing only during requests: its
// next request), so a quiet isolate costs no extra sync for it.

// watchLapse puts the entry at idx on the lapses list after a reply
// applied to it (apply) when it holds a lease of a strict windowed
// limiter with a life.
func (c *Core) watchLapse(l *limiter, idx int32) {
	e := c.tab.at(idx)
	if !l.strict || l.bucket || e.aux <= 0 || e.flags&fWatch != 0 {
		return
	}
	if s := c.tab.lease(e); s.expires == 0 || !s.hasLease {
		return
	}
	e.flags |= fWatch
	c.lapses = append(c.lapses, ref{idx, e.gen})
}

// noteLapses names, in the batch about to be cut at now, every watched key
// whose lease is void at now with units left in the current window, and
// drops from the list the keys whose lease is void.
func (c *Core) noteLapses(now int64) {
	k := 0
	for _, d := range c.lapses {
		e := c.tab.at(d.idx)
		if e.gen != d.gen || e.aux <= 0 {
			continue // evicted since (a new entry's flags start clear)
		}
		s := c.tab.lease(e)
		if s.expires != 0 && now < s.expires {
			c.lapses[k] = d
			k++
			continue
		}
		e.flags &^= fWatch
		if s.expires != 0 && lapsedUnits(s, window(now, c.lims[e.lim].cfg.Period)) {
			e.flags |= fLapse
			if !e.dirty() {
				e.flags |= fDirty
				c.dirty = append(c.dirty, d)
			}
		}
	}
	clear(c.lapses[k:])
	c.lapses = c.lapses[:k]
}

// lapsedUnits reports whether the lease s left units unused in window w:
// its lease for w, or its standing lease there.
func lapsedUnits(s *leaseRec, w int64) bool {
	switch {
	case !s.hasLease:
		return false
	case s.leaseWin == w:
		return s.lease > 0
	}
	return s.leaseWin < w && w <= s.standUntil && s.standA > 0
}
