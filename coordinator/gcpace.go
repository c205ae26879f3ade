package coordinator

import (
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
)

// The pace of the GC steps (gcRun; Options.GCInterval, GCBudget, GCPass).
//
// A step visits the stored records from where the previous one stopped, so
// a pass over N records at a fixed GCBudget every GCInterval takes
// N/GCBudget intervals: 10,000 records a second by default, 10 minutes for
// a store of 6 million keys, while one edge token can create keys far
// faster (each a stored record until a pass reaches it once it expired).
// The disk grew with the flood, whose expired records waited for the scan.
//
// So, while GC finds garbage, the steps come as often as a pass over the
// records the last pass counted in GCPass takes: the pace follows the
// store's size, and an expired record waits about GCPass whatever the
// store holds. A store with nothing to collect keeps the GCInterval pace
// and budget (no CPU spent scanning the same live records faster). Each
// step runs in the committer, between two groups of syncs, so two caps
// keep the syncs served: a fast step visits what fits in about gcStepTime
// at the last step's cost per record (a sync waits about that much more
// at most), and the next step waits at least (1-gcShare)/gcShare times as
// long as the last one held the committer. The deletes are written with
// the step's group, in the commit goroutine, pipelined with the next
// group's application.
//
// BenchmarkGCKeyFlood (1,000,000 keys of a 1 s limiter, then left to
// expire): deleted 98 s after the flood at the fixed pace (GCPass -1),
// 5.7-17.8 s after it with this pacing (the keys a pass found live wait
// for the next, within GCPass).
const (
	// gcShare is the most of the committer's time GC takes while it
	// hurries.
	gcShare = 0.25
	// gcStepTime is about the most a fast step holds the committer.
	gcStepTime = 5 * time.Millisecond
	// gcMinStep is the fewest records a fast step visits (unless
	// GCBudget is smaller), whatever the cost per record: fewer, and the
	// round trip through the committer would cost more than the visits.
	gcMinStep = 1000
	// gcGarbage is the share of the visited records a pass must delete
	// for GC to hurry: below it, the garbage does not pay for visiting
	// the live records faster.
	gcGarbage = 0.01
)

// gcPass counts the records one pass visited and deleted.
type gcPass struct{ visited, deleted int }

// garbage reports whether the pass deleted at least gcGarbage of what it
// visited (and something).
func (p gcPass) garbage() bool {
	return p.deleted > 0 && float64(p.deleted) >= gcGarbage*float64(p.visited)
}

// gcPacer decides when the next GC step runs and how many records it may
// visit, from what the previous steps did. It is used by one goroutine.
type gcPacer struct {
	interval time.Duration // Options.GCInterval: the idle pace's wait
	budget   int           // Options.GCBudget: the most records a step visits
	pass     time.Duration // Options.GCPass; <= 0: always the idle pace

	cur  gcPass // the pass in progress
	last gcPass // the last complete pass; visited 0: none yet
	// step is the budget of the step next hears of.
	step int
	// perRecord is the time a step held the committer per visited
	// record, the last step that visited at least gcMinStep/10; 0: none.
	perRecord float64
}

func newGCPacer(interval time.Duration, budget int, pass time.Duration) *gcPacer {
	return &gcPacer{interval: interval, budget: budget, pass: pass, step: budget}
}

// next records a step that did r, holding the committer for took, and
// returns the wait before the next step and that step's budget.
func (p *gcPacer) next(r merge.GCResult, took time.Duration) (time.Duration, int) {
	p.cur.visited += r.Visited
	p.cur.deleted += r.Deleted
	if r.Visited >= gcMinStep/10 {
		p.perRecord = float64(took) / float64(r.Visited)
	}
	size := max(p.cur.visited, p.last.visited)
	known := p.last.visited > 0
	hurry := p.pass > 0 && (p.cur.garbage() || p.last.garbage())
	if r.PassDone {
		p.last, p.cur = p.cur, gcPass{}
	}
	if !hurry {
		p.step = p.budget
		return p.interval, p.step
	}
	// The step's share of a pass over size records in p.pass, and never
	// longer than the idle pace for a step of its budget (GCBudget records
	// every GCInterval). A store whose pass takes a step or two is not
	// stepped more often than an idle one. Before a pass has counted the
	// records, as fast as the share allows.
	wait := time.Duration(0)
	if known {
		wait = min(time.Duration(float64(p.interval)*float64(p.step)/float64(p.budget)),
			time.Duration(float64(p.pass)*float64(r.Visited)/float64(size)))
	}
	wait = max(wait, time.Duration(float64(took)*(1-gcShare)/gcShare))
	p.step = p.budget
	if p.perRecord > 0 {
		p.step = min(p.budget, max(gcMinStep, int(float64(gcStepTime)/p.perRecord)))
	}
	return wait, p.step
}
