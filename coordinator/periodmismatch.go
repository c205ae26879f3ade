package coordinator

import (
	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A limiter's period changed at the coordinator (a restart with a new
// configuration file) while edges still run the old one: their window
// indexes (time / period, from the epoch) are of the other period. Taken as
// they were, a shorter period's indexes read as windows far ahead (the
// whole batch refused as clock skew, again at every retry) and a longer
// one's as windows far past, whose replies' views the module then refused
// as malformed (its window far ahead): either way the edge resent the same
// batch forever and nothing of it was counted, every other limiter
// included (an unchanged approximate limiter of 300 an hour admitted 1,191
// in one hour, counted 0). Such a limiter's items are taken out of the
// batch as uncounted (reason period_mismatch, uncounted.go) and the rest is
// applied, until the edges run the new configuration.
//
// An item's window is of another period when it is further from the
// batch's time than any clock could make it: a batch names its keys'
// current and previous windows at its cut (the batch's time, on the same
// clock), and a step of the edge's clock between a decision and the cut
// moves them apart by at most clock.MaxOffset (a step further, a host a
// day or more off put right once, may have the items decided before it
// taken as of another period: uncounted, where they would have been
// refused or dropped as stale); a period that differs by 0.1% moves an
// index from the epoch by weeks.

// periodSlack is how far (ns) an item's window may lie from the batch's
// time, beyond a period, before it counts as of another period: twice the
// largest clock offset an edge takes (48 h).
const periodSlack = 2 * clock.MaxOffset

// periodMismatches returns the windowed limiters of b whose items (entries,
// asks, final denials) name a window that cannot be of the coordinator's
// period at the batch's time; nil when none.
func (c *Coordinator) periodMismatches(b *wire.Batch) map[string]bool {
	var out map[string]bool
	if b.At <= 0 {
		return nil // no edge's time: the merge's checks answer it
	}
	check := func(limiter string, window int64) {
		l := c.m.Limiter(limiter)
		if l == nil || l.IsBucket() || l.Period <= 0 || out[limiter] {
			return
		}
		lo := (b.At - l.Period - periodSlack) / l.Period
		hi := (b.At + periodSlack) / l.Period
		if window < lo || window > hi {
			if out == nil {
				out = map[string]bool{}
			}
			out[limiter] = true
		}
	}
	for i := range b.Entries {
		check(b.Entries[i].Limiter, b.Entries[i].Window)
	}
	for i := range b.Asks {
		check(b.Asks[i].Limiter, b.Asks[i].Window)
	}
	for i := range b.Denials {
		check(b.Denials[i].Limiter, b.Denials[i].Window)
	}
	return out
}
