package sim

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
)

// Kill kills isolates mid-run as kill -9 does: at At each stops deciding
// and syncing at once; its unsynced and in-flight deltas are lost, the
// requests it holds for a sync are denied, and whatever it reserved at the
// coordinator (leases) stays reserved until it lapses there. After Restart
// a new incarnation (a cold isolate with a new id) takes each killed
// isolate's place; until then the requests it would have received go to
// the live isolates of its location (any location's when its has none),
// spread evenly, as a load balancer sends them elsewhere. A request that
// finds no live isolate is denied.
//
// Kills apply to the strategies whose nodes are isolates (local-only,
// approximate, strict, auto and their feedback variants); the central and
// per-location counters do not die. A graceful stop (an isolate that
// reports and returns its leases first) is not modelled.
type Kill struct {
	// At is when the isolates die (simulated time).
	At Duration `json:"at"`
	// First is the index of the first isolate killed. Default 0.
	First int `json:"first,omitempty"`
	// Count is how many isolates die: First..First+Count-1. Default 0:
	// every isolate from First on (with First 0, a fleet restart).
	Count int `json:"count,omitempty"`
	// Restart is how long after At a new incarnation takes each killed
	// isolate's place. Default 0: at once. Negative: never.
	Restart Duration `json:"restart,omitempty"`
}

// validateKills reports the problems of s.Kills.
func (s *Scenario) validateKills(bad func(string, ...any)) {
	ok := true
	for i, k := range s.Kills {
		p := fmt.Sprintf("kills[%d]", i)
		if k.At < 0 || k.First < 0 || k.Count < 0 || k.First >= s.Isolates || k.First+k.Count > s.Isolates {
			bad("%s: want at >= 0 and 0 <= first < first+count <= isolates (%d), got at %v, first %d, count %d",
				p, s.Isolates, time.Duration(k.At), k.First, k.Count)
			ok = false
		}
		if k.Restart < 0 && k.First == 0 && (k.Count == 0 || k.Count == s.Isolates) {
			bad("%s: every isolate killed and none restarts: nothing would answer", p)
			ok = false
		}
	}
	if ok {
		if last, dead := s.killedForGood(); dead {
			bad("kills: together they kill every isolate and none restarts (the last from kills[%d], at %v): nothing would answer",
				last, time.Duration(s.Kills[last].At))
		}
	}
}

// killedForGood reports whether s.Kills leave every isolate dead with no
// restart to come, and which kill killed the last: each kill alone may
// spare some (two kills of half the isolates each, neither restarting).
// It replays the kills as the engine runs them: in time order (kills at
// the same time in their order), a kill finds an isolate that is dead and
// not restarted yet dead and leaves it (its restart stays as scheduled),
// and a restart at a kill's time comes after the kill.
func (s *Scenario) killedForGood() (last int, dead bool) {
	if len(s.Kills) == 0 || s.Isolates <= 0 {
		return 0, false
	}
	order := make([]int, len(s.Kills))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return s.Kills[order[a]].At < s.Kills[order[b]].At })
	const never = math.MaxInt64
	back := make([]int64, s.Isolates) // when each isolate answers again: 0 alive, never: not at all
	killer := make([]int, s.Isolates)
	for _, i := range order {
		k := s.Kills[i]
		n := k.Count
		if n == 0 {
			n = s.Isolates - k.First
		}
		at := int64(k.At)
		for idx := k.First; idx < k.First+n; idx++ {
			if back[idx] != 0 && back[idx] >= at {
				continue // dead: the kill finds it so
			}
			switch {
			case k.Restart == 0:
				back[idx] = 0
			case k.Restart < 0:
				back[idx], killer[idx] = never, i
			default:
				back[idx] = at + int64(k.Restart)
			}
		}
	}
	last = killer[0]
	for idx := range back {
		if back[idx] != never {
			return 0, false
		}
		if k := killer[idx]; s.Kills[k].At > s.Kills[last].At || s.Kills[k].At == s.Kills[last].At && k > last {
			last = k // killed later in the replay
		}
	}
	return last, true
}

// killable reports whether the strategy's nodes are isolates that kills
// apply to.
func (e *engine) killable() bool {
	switch st := e.strat.(type) {
	case localOnly:
		return true
	case edge:
		return !st.byLocation
	}
	return false
}

// scheduleKills queues an evKill for every isolate of every kill.
func (e *engine) scheduleKills() {
	if !e.killable() {
		return
	}
	for i, k := range e.sc.Kills {
		n := k.Count
		if n == 0 {
			n = e.isolates - k.First
		}
		for idx := k.First; idx < k.First+n; idx++ {
			e.heap.push(event{t: int64(k.At), tok: uint64(i), node: int32(idx), kind: evKill})
		}
	}
}

// kill kills nd at now (kill k of the scenario) and restarts it, or
// schedules its restart.
func (e *engine) kill(nd *node, now int64, k Kill) error {
	if nd.dead {
		return nil // already dead: its restart stays as scheduled
	}
	e.res.Kills++
	if err := e.stop(nd, now); err != nil {
		return err
	}
	if k.Restart == 0 {
		return e.restart(nd, now)
	}
	nd.dead = true
	if k.Restart > 0 {
		e.heap.push(event{t: now + int64(k.Restart), node: int32(nd.index), gen: nd.gen, kind: evRestart})
	}
	return nil
}

// live returns the isolate that takes a request sent to isolate i: i, or
// when it is dead one of the live isolates of its location, or of any
// location when its location has none, drawn uniformly for each request
// (a load balancer spreads a dead isolate's requests over the live ones;
// sending them all to one, as the next live one in index order did, made
// that isolate take the requests of 17 on dying-isolates); ok is false
// when all are dead.
func (e *engine) live(i int) (int, bool) {
	if len(e.sc.Kills) == 0 || !e.killable() || !e.nodes[i].dead {
		return i, true
	}
	h := limitmath.Mix64(e.seed ^ uint64(e.res.Requests)*0x9e3779b97f4a7c15)
	cand := e.liveBuf[:0]
	for k := e.nodes[i].loc; k < len(e.nodes); k += e.locations {
		if !e.nodes[k].dead && e.nodes[k].loc == e.nodes[i].loc {
			cand = append(cand, k)
		}
	}
	if len(cand) == 0 {
		for k := range e.nodes {
			if !e.nodes[k].dead {
				cand = append(cand, k)
			}
		}
	}
	e.liveBuf = cand
	if len(cand) == 0 {
		return i, false
	}
	return cand[h%uint64(len(cand))], true
}
