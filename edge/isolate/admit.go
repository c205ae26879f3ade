package isolate

import (
	"context"
	"fmt"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Admit records that the host admitted cost of (limiter, key) at now (ns)
// without the module's decision: what a fail policy admits in the
// module's place on a stale view (edge/failpolicy.Leased). The module
// counts it as an admission, so its next batch reports it and the
// coordinator counts it once reachable (see core.Core.Admit).
func (i *Isolate) Admit(ctx context.Context, limiter int, key string, cost, now int64) error {
	if len(key) > wire.MaxKeyLen {
		return fmt.Errorf("isolate: admit: %w", core.ErrKeyTooLong)
	}
	if err := i.follow(ctx); err != nil {
		return err
	}
	i.mem.WriteString(i.keyBuf, key)
	i.stack[0], i.stack[1], i.stack[2], i.stack[3] = uint64(uint32(limiter)), uint64(len(key)), uint64(cost), uint64(now)
	return i.status(ctx, "admit", i.admit)
}
