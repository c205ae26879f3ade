package core

import "github.com/edgelimit/edgelimit/wasm/wire"

// fullNotice reports whether v, a view of a key this isolate does not hold
// (lim, key), is worth a new entry: a notice that the key's current window
// counted its whole limit (coordinator/merge/fullnotice.go), so that a
// request for it here is denied at once rather than held for a lease the
// coordinator can only refuse. Only while the table has room: a notice
// never evicts a key.
func (c *Core) fullNotice(lim int, key []byte, v *wire.View, now int64) bool {
	l := &c.lims[lim]
	if l.bucket || c.tab.live >= c.tab.max || v.Window != window(now, l.cfg.Period) {
		return false
	}
	limit := v.Limit
	if limit <= 0 {
		limit = c.baseLimit(lim, key)
	}
	return v.Count >= limit
}
