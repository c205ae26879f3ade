package isolate

import (
	"context"
	"fmt"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Observe tells the module what the upstream answered to a request of
// (limiter, key) at now (ns): status (0 when no answer came) and headers
// as [name, value] pairs (Retry-After, RateLimit, X-RateLimit-*...). A 429
// pauses the key here at once and, after the next sync, in every isolate;
// see core.Core.Observe. It returns the key's upstream state after it;
// Observed.Sync asks for an early sync, so the fleet learns at once.
//
// With local set the answer changes this isolate only and is not reported
// (see wire.Observation.Local).
func (i *Isolate) Observe(ctx context.Context, limiter, key string, status int64, headers [][2]string, local bool, now int64) (wire.Observed, error) {
	var out wire.Observed
	o := wire.Observation{Version: wire.Version, Limiter: limiter, Key: key, Now: now, Status: status, Headers: headers, Local: local}
	in := o.AppendMsg(nil)
	if err := i.follow(ctx); err != nil {
		return out, err
	}
	if err := i.writeIO(ctx, in); err != nil {
		return out, err
	}
	i.stack[0] = uint64(len(in))
	if err := i.observe.CallWithStack(ctx, i.stack[:]); err != nil {
		return out, i.trapped(ctx, "observe", err)
	}
	n := int32(i.stack[0])
	if n < 0 {
		return out, fmt.Errorf("isolate: observe: %w", core.ErrorForCode(n))
	}
	b, err := i.readIO(ctx, nil, n)
	if err != nil {
		return out, err
	}
	if err := out.UnmarshalMsg(b); err != nil {
		return out, fmt.Errorf("isolate: observe: %w", err)
	}
	return out, nil
}
