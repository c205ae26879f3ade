package merge

import (
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// countWindow returns the window a delta reported for window w of a
// windowed limiter lim is counted in, at now, for a key whose record is
// of window recWin (-1: not known): w, except on a sliding window where w
// is ahead of this coordinator's clock (an isolate whose clock runs fast
// within MaxClockSkew, or a client with an edge token) and of the record:
// there the current window. A key keeps two windows' counts, and rolled
// to w+1 it drops w-1, whose count a sliding window still weighs in w:
// one entry of cost 0 for the next window erased the previous window's
// 100 from every isolate's view 20 ms into the window, and the fleet
// could admit the limit again (TestAheadEntryKeepsSlidingPrev). The
// coordinator's clock is the one the isolates' windows follow (they read
// it before their first batch), so cost reported ahead was admitted in
// its current window. Lease bookkeeping keeps w (applyDelta): the
// isolate's lease is for the window it reported. A fixed window counts
// w: rolled ahead, the current window's count is kept as the previous
// one, and the window before it weighs nothing.
func countWindow(lim *wire.LimiterConfig, recWin, w, now int64) int64 {
	if lim == nil || lim.Algorithm != wire.SlidingWindow {
		return w
	}
	return min(w, max(limitmath.Window(now, lim.Period), recWin))
}
