package core

import "github.com/edgelimit/edgelimit/wasm/wire"

// fullNotice reports whether v, a view of a key this isolate does not hold
// (lim, key), is worth a new entry: a notice that the key's current window
// counted its whole limit (coordinator/merge/fullnotice.go), so that a
// request for it here is denied at once rather than held for a lease the
// coordinator can only refuse. Only while the table is under a quarter
// of its keys (Config.MaxKeys): a notice never evicts a key, and the keys
// of other isolates' traffic, which this one may never see, do not grow
// its memory past that (an entry is 176 bytes; 100,000 keys by default).
func (c *Core) fullNotice(lim int, key []byte, v *wire.View, now int64) bool {
	l := &c.lims[lim]
	if l.bucket || c.tab.live >= c.tab.max/4 || v.Window != window(now, l.cfg.Period) {
		return false
	}
	limit := v.Limit
	if limit <= 0 {
		limit = c.baseLimit(lim, key)
	}
	return v.Count >= limit
}
