package isolate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Load the module in a Go host: compile it once, start an isolate with
// its limiters, and decide. Time is passed in (ns), so this runs the same
// on any clock.
func Example() {
	ctx := context.Background()
	rt, err := isolate.NewRuntime(ctx, isolate.Options{})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)
	cfg := wire.Config{Version: wire.Version, IsolateID: "example-0", Limiters: []wire.LimiterConfig{
		{Name: "llm", Algorithm: wire.FixedWindow, Limit: 3, Period: int64(time.Second), Mode: wire.Approximate}}}
	iso, err := rt.NewIsolate(ctx, cfg, 1)
	if err != nil {
		panic(err)
	}
	defer iso.Close(ctx)
	now := int64(1_000 * time.Second)
	for i := 0; i < 4; i++ {
		d, err := iso.Decide(ctx, 0, "upstream", 1, now)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 2
	// true 1
	// true 0
	// false 0
}
