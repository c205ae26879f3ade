package coordinator

import (
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// observers tells every one of its merge.Observers of each applied batch,
// in order (the dashboard, the per-limiter metrics).
type observers []merge.Observer

// Applied implements merge.Observer.
func (os observers) Applied(b *wire.Batch, rp *wire.Reply, now int64) {
	for _, o := range os {
		o.Applied(b, rp, now)
	}
}
