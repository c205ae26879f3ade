// Package gctune is the garbage-collector setting of the edgelimit
// coordinator process (`edgelimit coordinator` calls Tune; the
// coordinator's benchmarks measure under the same).
package gctune

import (
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the GOGC `edgelimit coordinator` runs with unless the
// GOGC environment variable is set. The live heap is bounded by the caches
// (MergerOptions), so trading some memory for fewer collections is safe: at
// 100 the collector ran about 8% of the CPU under sync load, and its mark
// assists land on request goroutines (sync latency).
const DefaultGCPercent = 400

// Tune sets the garbage collector of the coordinator process: GOGC
// DefaultGCPercent unless $GOGC is set, and a soft memory limit of
// memoryLimit bytes unless $GOMEMLIMIT is set (`edgelimit coordinator`
// passes coordinator.BudgetFor(--max-memory).GoLimit: GOGC 400 lets the
// heap reach 5x the live heap; near the limit the collector runs earlier
// instead). It returns a function restoring the previous settings.
func Tune(memoryLimit int64) (restore func()) {
	oldGC, oldLimit := -2, int64(-1)
	if os.Getenv("GOGC") == "" {
		oldGC = debug.SetGCPercent(DefaultGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		oldLimit = debug.SetMemoryLimit(memoryLimit)
	}
	return func() {
		if oldGC != -2 {
			debug.SetGCPercent(oldGC)
		}
		if oldLimit >= 0 {
			debug.SetMemoryLimit(oldLimit)
		}
	}
}
