package coordinator

import (
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the GOGC the coordinator binary runs with unless the
// GOGC environment variable is set. The live heap is bounded by the caches
// (MergerOptions), so trading some memory for fewer collections is safe: at
// 100 the collector ran about 8% of the CPU under sync load, and its mark
// assists land on request goroutines (sync latency).
const DefaultGCPercent = 400

// TuneGC sets the garbage collector for a coordinator process: GOGC
// DefaultGCPercent unless $GOGC is set. It returns a function restoring the
// previous setting.
func TuneGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(DefaultGCPercent)
	return func() { debug.SetGCPercent(old) }
}
