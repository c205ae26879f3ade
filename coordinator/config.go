package coordinator

import (
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// DefaultConfig is the configuration used when no --config is given: one
// limiter "default", fixed_window, 100 per 1s, approximate mode.
func DefaultConfig() wire.Config {
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{{
		Name: "default", Algorithm: wire.FixedWindow, Limit: 100, Period: int64(time.Second)}}}
}
