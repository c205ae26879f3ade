package host

import (
	"context"
	"sync/atomic"
)

// A coordinator configured with other limits than this edge's --config
// tells each key's limit in its views (wire.View.Limit); the module then
// answers and decides with the coordinator's (wire.Stats.ForeignLimits
// counts the views that differed). The host says so once in its log.

// sayForeign logs, once per host (said), that the isolate of s applied
// views whose limit differs from its configuration. The caller holds no
// lock; it reads the isolate's stats until the first such view.
func (s *slot) sayForeign(ctx context.Context, said *atomic.Bool) {
	if said.Load() {
		return
	}
	s.mu.Lock()
	st, err := s.iso.Stats(ctx)
	s.mu.Unlock()
	if err != nil || st.ForeignLimits == 0 || !said.CompareAndSwap(false, true) {
		return
	}
	s.log.Warn("host: the coordinator's limits differ from this edge's configuration; answers, headers and decisions use the coordinator's (keep the two configurations the same)",
		"views", st.ForeignLimits)
}
