package failpolicy_test

import (
	"fmt"

	"github.com/edgelimit/edgelimit/edge/failpolicy"
)

// How a caller with its own clock and staleness (the simulator: one Share
// per node, keys as int32 ids, stale = sched.Stale(now)) applies a policy
// before asking the module.
func ExampleApply() {
	share := failpolicy.NewShare[int32](0)
	q := failpolicy.Quota{Limit: 6, Period: 1e9, Isolates: 4} // 1 per isolate per second
	for i, now := range []int64{5e9, 5e9 + 1, 6e9} {
		v := failpolicy.Apply(failpolicy.LocalShare, true, share, 7, 1, q, now)
		fmt.Println(i, v == failpolicy.Pass) // Pass: now ask the module; Deny: denied
	}
	// Output:
	// 0 true
	// 1 false
	// 2 true
}
