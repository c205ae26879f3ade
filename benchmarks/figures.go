package benchmarks

import (
	"context"
	"fmt"
	"strconv"

	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/wasm"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The README's figures that `edgelimit bench -readme` (`make figures`)
// reproduces in one run are named here, as the first cell of the README
// row each one fills; readme_test.go checks that the README names no
// row outside these lists and that its deterministic figures (the module
// size, the memory per key) are the module's.

// ModuleRows are the rows of the README's "Module and host" table, in
// its order.
var ModuleRows = []string{
	RowModuleSize,
	"instantiate an isolate",
	"decision via wazero fast path, 1 hot key",
	"same, 100,000 keys",
	"same decision through the Extism Go SDK `Plugin.Call`",
	"a central limiter asking Redis per decision",
	RowFlood,
}

// The README rows whose figures are deterministic.
const (
	RowModuleSize = "module size"
	RowFlood      = "1,000,000 unique keys into one isolate, cap 100,000"
	RowMemory     = "linear memory of one isolate with 100,000 keys of 32 bytes"
)

// GroupDecisionCost is the group of the README's peers table holding the
// module benchmarks' per-decision cost (hot key and Redis round trips),
// beside the groups of Systems.
const GroupDecisionCost = "decision cost"

// DecisionCostRows are the rows of GroupDecisionCost: names of All.
var DecisionCostRows = []string{
	"wazero fast path, 1 hot key",
	"Redis per decision: INCR+EXPIRE fixed window",
	"Redis per decision: GCRA Lua script",
}

// ModuleBytes returns the size of the module the host embeds
// (wasm/edgelimit.wasm).
func ModuleBytes() int { return len(wasm.Module) }

// KB formats n bytes as the README does: "153 KB (153,348 bytes)", KB
// being 1,000 bytes.
func KB(n int) string {
	return fmt.Sprintf("%.0f KB (%s bytes)", float64(n)/1000, Thousands(int64(n)))
}

// Thousands formats n with commas between groups of three digits.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// Growth is a size linear memory grew to, and how many keys had been
// decided when it first had that size.
type Growth struct {
	Bytes  uint32
	AtKeys int
}

// Memory is what one isolate's linear memory held after deciding Keys
// distinct keys (MeasureMemory).
type Memory struct {
	Keys      int    // distinct keys decided
	Idle      uint32 // linear memory before the first key, bytes
	Linear    uint32 // linear memory after the last key, bytes
	Stats     wire.Stats
	Growth    []Growth // every size linear memory had, in order
	AtCapFull uint32   // linear memory when 3x the key cap had been decided (0 if fewer were)
}

// PerKey returns the linear memory the keys added, per key.
func (m Memory) PerKey() float64 {
	return float64(m.Linear-m.Idle) / float64(m.Keys)
}

// StatePerKey returns the module's own count of its state (state_bytes)
// per key tracked.
func (m Memory) StatePerKey() float64 {
	return float64(m.Stats.StateBytes) / float64(m.Stats.Keys)
}

// MemoryKey returns the i-th key of the memory figures: "key-" and i,
// zero-padded to keyLen bytes (32 in the README, as `make bench-js` and
// edge/isolate's TestMemoryOf100kKeys make them).
func MemoryKey(dst []byte, i, keyLen int) []byte {
	s := strconv.Itoa(i)
	dst = append(dst[:0], "key-"...)
	for len(dst)+len(s) < keyLen {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// FloodKey returns the i-th key of the flood figure: "customer-" and i
// (edge/isolate's TestFloodOfUniqueKeysStaysBounded).
func FloodKey(dst []byte, i int) []byte {
	return strconv.AppendInt(append(dst[:0], "customer-"...), int64(i), 10)
}

// MeasureMemory decides n distinct keys made by key (1 µs apart, one
// approximate fixed window limiter that admits them all, never synced) in
// a fresh isolate whose key cap is maxKeys (0: the module's default,
// 100,000), and returns its linear memory and stats. The result is a
// deterministic function of the module and the arguments.
func MeasureMemory(ctx context.Context, n int, maxKeys int64, key func(dst []byte, i int) []byte) (Memory, error) {
	rt, err := isolate.NewRuntime(ctx, isolate.Options{MemoryLimitPages: 4096})
	if err != nil {
		return Memory{}, fmt.Errorf("benchmarks: %w", err)
	}
	defer rt.Close(ctx)
	cfg := wire.Config{Version: wire.Version, IsolateID: "mem", MaxKeys: maxKeys, Limiters: []wire.LimiterConfig{
		{Name: "bench", Algorithm: wire.FixedWindow, Limit: 1_000_000_000, Period: 1e9},
	}}
	iso, err := rt.NewIsolate(ctx, cfg, 1)
	if err != nil {
		return Memory{}, fmt.Errorf("benchmarks: %w", err)
	}
	defer iso.Close(ctx)
	capKeys := maxKeys
	if capKeys == 0 {
		capKeys = 100_000
	}
	m := Memory{Keys: n, Idle: iso.MemoryBytes()}
	m.Growth = []Growth{{m.Idle, 0}}
	const now = int64(1_800_000_000_000_000_000)
	var k []byte
	for i := 0; i < n; i++ {
		k = key(k, i)
		d, err := iso.DecideBytes(ctx, 0, k, 1, now+int64(i)*1000)
		if err != nil {
			return Memory{}, fmt.Errorf("benchmarks: key %d: %w", i, err)
		}
		if !d.Allowed {
			return Memory{}, fmt.Errorf("benchmarks: key %d denied", i)
		}
		if b := iso.MemoryBytes(); b != m.Growth[len(m.Growth)-1].Bytes {
			m.Growth = append(m.Growth, Growth{b, i + 1})
		}
		if i+1 == 3*int(capKeys) {
			m.AtCapFull = iso.MemoryBytes()
		}
	}
	m.Linear = iso.MemoryBytes()
	if m.Stats, err = iso.Stats(ctx); err != nil {
		return Memory{}, fmt.Errorf("benchmarks: %w", err)
	}
	return m, nil
}

// MemoryFigure measures the README's memory-per-key row: 100,000 keys of
// 32 bytes at the default key cap, and, to find where linear memory
// doubles past them, the same keys up to 160,000 with a cap of 200,000.
func MemoryFigure(ctx context.Context) (at100k, growth Memory, err error) {
	key := func(dst []byte, i int) []byte { return MemoryKey(dst, i, 32) }
	if at100k, err = MeasureMemory(ctx, 100_000, 0, key); err != nil {
		return
	}
	growth, err = MeasureMemory(ctx, 160_000, 200_000, key)
	return
}

// From returns how many keys had been decided when linear memory first
// had b bytes, or -1 if it never had.
func (m Memory) From(b uint32) int {
	for _, g := range m.Growth {
		if g.Bytes == b {
			return g.AtKeys
		}
	}
	return -1
}

// MiB formats b bytes in MiB, without decimals when whole.
func MiB(b uint32) string {
	if b%(1<<20) == 0 {
		return strconv.Itoa(int(b >> 20))
	}
	return fmt.Sprintf("%.1f", float64(b)/(1<<20))
}

// FormatMemory formats MemoryFigure's result as the README states it.
func FormatMemory(at100k, growth Memory) string {
	return fmt.Sprintf("%s MiB (%.0f bytes per key; the module's own count, `state_bytes`, %.1f MiB, %.0f bytes per key; "+
		"16 MiB from %s keys, 32 MiB from %s, 64 MiB from %s with a key cap of 200,000)",
		MiB(at100k.Linear), at100k.PerKey(), float64(at100k.Stats.StateBytes)/(1<<20), at100k.StatePerKey(),
		Thousands(int64(at100k.From(16<<20))), Thousands(int64(at100k.From(32<<20))), Thousands(int64(growth.From(64<<20))))
}
