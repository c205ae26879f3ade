package coordinator_test

import (
	"context"
	"fmt"
	"github.com/edgelimit/edgelimit/clock"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Run the coordinator (in memory here; Dir keeps it on disk) and apply an
// isolate's batch: the reply is the global view, and a retry of the same
// batch counts once.
func Example() {
	now := int64(1_000 * time.Second)
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "llm", Algorithm: wire.FixedWindow, Limit: 6, Period: int64(time.Second), Mode: wire.Approximate}}}
	c, err := coordinator.Open(coordinator.Options{InMemory: true, Config: cfg, Clock: clock.Func(func() int64 { return now })})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	b := &wire.Batch{Version: wire.Version, Isolate: "edge-0", Seq: 1, At: now,
		Entries: []wire.Delta{{Limiter: "llm", Key: "upstream", Window: now / int64(time.Second), Delta: 2, Demand: 2}}}
	for i := 0; i < 2; i++ { // the second is a retry
		r, err := c.Sync(context.Background(), b)
		if err != nil {
			panic(err)
		}
		fmt.Println(r.Entries[0].Key, r.Entries[0].Count)
	}
	// Output:
	// upstream 2
	// upstream 2
}
