package sim

import (
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Through a partition of every isolate, the fail policies act on strict
// and auto limiters as in the edge host (edge/host decideAlone,
// failpolicy.Leased): closed denies what no lease covers (0 over), open
// admits alone within the whole limit per isolate (the demand here, over
// the limit), local-share within each isolate's share. Before, the
// simulator denied every lease miss on a stale view, and showed open and
// local-share as closed (0 over, the same admissions), where the edge
// host admits.
func TestFailPoliciesOnLeasedLimitersInAPartition(t *testing.T) {
	over := map[string]float64{}
	util := map[string]float64{}
	for _, policy := range []string{wire.FailClosed, wire.FailOpen, wire.FailLocalShare} {
		sc := small(t, 12, 100, 150, "poisson", 30*time.Second)
		sc.FailPolicy = policy
		for i := range 12 {
			sc.Network.Partitions = append(sc.Network.Partitions, Partition{Isolate: &i, Start: Duration(20 * time.Second), Duration: Duration(5 * time.Second)})
		}
		r := runScenario(t, sc, Strict)
		over[policy], util[policy] = float64(r.WorstOverrun), r.Utilisation
		t.Logf("strict, %s: worst window %d over, utilisation %.1f%%", policy, r.WorstOverrun, r.Utilisation)
	}
	if over[wire.FailClosed] != 0 {
		t.Errorf("closed: %v over", over[wire.FailClosed])
	}
	if over[wire.FailOpen] < 25 {
		t.Errorf("open: worst window %v over, want the partition's demand past the limit (25 or more of 50)", over[wire.FailOpen])
	}
	if util[wire.FailLocalShare] <= util[wire.FailClosed] || over[wire.FailLocalShare] > 20 {
		t.Errorf("local-share: utilisation %.1f%% (closed %.1f%%), %v over; want more than closed, at most 20 over (the window the partition begins in holds what was admitted before it on top of the shares)",
			util[wire.FailLocalShare], util[wire.FailClosed], over[wire.FailLocalShare])
	}
}
