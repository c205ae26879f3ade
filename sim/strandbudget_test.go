package sim

import (
	"context"
	"testing"
	"time"
)

// Simulator.StrandBudget is the coordinator's --strand-budget: on sparse
// traffic (2.3 requests per isolate per second, a limit of 100/s over 64
// isolates) a larger budget lets more isolates hold a unit ahead, so fewer
// requests wait, and more budget is stranded in units held by isolates
// that get no request; the limit holds whatever the budget.
func TestStrandBudgetTradesWaitsForUtilisation(t *testing.T) {
	sc, err := Builtin("corpus/sparse")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = Duration(20 * time.Second)
	rows := map[float64]CorpusRow{}
	for _, budget := range []float64{0, 0.3} {
		s, err := New(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s.StrandBudget = budget
		r, err := s.RunCorpus(context.Background(), []*Scenario{sc}, CorpusOptions{Strategies: []string{Auto}, Seeds: []uint64{1}})
		s.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rows[budget] = r[0]
		if r[0].WorstOverrunPct > 0 {
			t.Errorf("strand budget %g: worst window %.2f%% over the limit", budget, r[0].WorstOverrunPct)
		}
	}
	def, big := rows[0], rows[0.3]
	t.Logf("default budget: waited %.1f%%, stranded %.2f%%; 0.3: waited %.1f%%, stranded %.2f%%", def.WaitedPct, def.StrandedPct, big.WaitedPct, big.StrandedPct)
	if big.WaitedPct >= def.WaitedPct || big.StrandedPct <= def.StrandedPct {
		t.Errorf("a budget of 0.3 against the default: waited %.1f%% vs %.1f%%, stranded %.2f%% vs %.2f%%; want fewer waits and more stranded",
			big.WaitedPct, def.WaitedPct, big.StrandedPct, def.StrandedPct)
	}
}
