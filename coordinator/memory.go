package coordinator

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/edgelimit/edgelimit/coordinator/merge"
)

// The coordinator's memory bound. What grows with the keys a coordinator
// sees is its caches: the key states (MergerOptions.MaxCachedKeys, about
// 500 bytes of live heap each in a flood of distinct keys), the isolates'
// entries and high-water marks, the log held until a checkpoint
// (CheckpointBytes), and Pebble's block cache; evicted keys live only in
// Pebble, on disk. Options.MaxMemory sizes them all from one figure, and
// MemoryBudget.GoLimit is the Go runtime's soft memory limit for the rest
// (edgelimit coordinator sets it, internal/gctune): the caches take about
// a fifth of it, so the collector does not run much more often once the
// caches are full (a heap close to the limit would make it run
// continuously and halve the ingest rate).

// DefaultMaxMemory is the default of Options.MaxMemory: 768 MiB.
const DefaultMaxMemory = 768 << 20

// MinMaxMemory is the smallest Options.MaxMemory: 128 MiB.
const MinMaxMemory = 128 << 20

// memoryReserve is what MaxMemory keeps for memory neither the Go limit
// nor the block cache covers: 32 MiB (Pebble's memtables, 16 MiB,
// pebblestore.MemTableMemory, and the binary's resident text) plus an
// eighth of MaxMemory (the C allocator's overhead around the block cache
// and what the Go heap overshoots its soft limit by): 128 MiB at the
// default. A twenty-fourth (64 MiB) was not enough: a 10-minute steady
// load over 1,000,000 keys (BenchmarkSteadyLoadMemory) reached 785 MiB of
// RSS at 768 MiB, about 145 MiB outside the Go limit.
func memoryReserve(maxMemory int64) int64 { return 32<<20 + maxMemory/8 }

// bytesPerCachedKey is the MaxMemory each cached key state accounts for
// (its live heap, about 500 bytes, and the collector's headroom above it):
// 3 KiB, so DefaultMaxMemory caches merge.DefaultMaxCachedKeys (262144).
const bytesPerCachedKey = 3 << 10

// MemoryBudget is how a MaxMemory is shared out.
type MemoryBudget struct {
	// MaxMemory is the bound, bytes.
	MaxMemory int64
	// GoLimit is the Go runtime's soft memory limit, bytes
	// (runtime/debug.SetMemoryLimit): MaxMemory less BlockCache and a
	// reserve for the memory outside the Go heap, 32 MiB and an eighth
	// of MaxMemory (576 MiB at the default).
	GoLimit int64
	// BlockCache is Pebble's block cache, bytes: MaxMemory/12 (64 MiB at
	// the default).
	BlockCache int64
	// Merger holds the cache bounds: MaxCachedKeys one per 3 KiB of
	// MaxMemory (262144 at the default), MaxIsolateEntries 4 per cached
	// key, MaxCachedIsolates 1 per 4 cached keys, CheckpointBytes
	// MaxMemory/12. At the default they are merge's defaults.
	Merger merge.MergerOptions
}

// BudgetFor shares maxMemory (bytes, at least MinMaxMemory; 0 takes
// DefaultMaxMemory) out.
func BudgetFor(maxMemory int64) (MemoryBudget, error) {
	if maxMemory == 0 {
		maxMemory = DefaultMaxMemory
	}
	if maxMemory < MinMaxMemory {
		return MemoryBudget{}, fmt.Errorf("coordinator: the memory bound (Options.MaxMemory, --max-memory) must be at least %d MiB, got %d bytes", MinMaxMemory>>20, maxMemory)
	}
	keys := int(min(maxMemory/bytesPerCachedKey, math.MaxInt32/4))
	return MemoryBudget{
		MaxMemory:  maxMemory,
		GoLimit:    maxMemory - maxMemory/12 - memoryReserve(maxMemory),
		BlockCache: maxMemory / 12,
		Merger: merge.MergerOptions{MaxCachedKeys: keys, MaxIsolateEntries: 4 * keys,
			MaxCachedIsolates: max(keys/4, 1), CheckpointBytes: maxMemory / 12},
	}, nil
}

// applyMemory sets every zero cache bound of o from o.MaxMemory.
func (o *Options) applyMemory() {
	if o.MaxMemory == 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	b, err := BudgetFor(o.MaxMemory)
	if err != nil {
		return // Validate reports it
	}
	m := &o.Merger
	if m.MaxCachedKeys == 0 {
		m.MaxCachedKeys = b.Merger.MaxCachedKeys
	}
	if m.MaxIsolateEntries == 0 {
		m.MaxIsolateEntries = b.Merger.MaxIsolateEntries
	}
	if m.MaxCachedIsolates == 0 {
		m.MaxCachedIsolates = b.Merger.MaxCachedIsolates
	}
	if m.CheckpointBytes == 0 {
		m.CheckpointBytes = b.Merger.CheckpointBytes
	}
}

// ParseBytes reads a size in bytes: a whole number, optionally followed by
// B, KiB, MiB, GiB or TiB (powers of 1024), as "768MiB" or "1GiB".
func ParseBytes(s string) (int64, error) {
	num := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("coordinator: size %q: want a whole number of bytes, optionally with KiB, MiB, GiB or TiB (as 768MiB)", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("coordinator: size %q: too large", s)
	}
	return n * mult, nil
}
