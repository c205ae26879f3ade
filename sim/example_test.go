package sim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/edgelimit/edgelimit/sim"
)

// Run the simulator: a built-in scenario, one strategy at one sync
// interval, under virtual time (the same seed gives the same figures).
func Example() {
	ctx := context.Background()
	s, err := sim.New(ctx)
	if err != nil {
		panic(err)
	}
	defer s.Close(ctx)
	sc, err := sim.Builtin("llm-6rps")
	if err != nil {
		panic(err)
	}
	sc.Duration = sim.Duration(10 * time.Second)
	r, err := s.Run(ctx, sc, sim.Auto, 100*time.Millisecond, 1, nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: worst key-window %.0f%% over the limit\n", r.Strategy, r.WorstOverrunPct)
	// Output: auto: worst key-window 0% over the limit
}
