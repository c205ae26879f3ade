// Package benchmarks measures the edge module side by side with its peers:
// the scalar fast path under wazero, the same decision through the Extism
// Go SDK, the native core, golang.org/x/time/rate (the bar for a local
// decision), and a central limiter asking Redis on every decision (see
// redis.go). Run with `go test -bench . ./benchmarks/` or `edgelimit bench`,
// which prints medians and ratios.
package benchmarks

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/wasm"
	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
	extism "github.com/extism/go-sdk"
	"golang.org/x/time/rate"
)

// Config is the limiter configuration every benchmark uses: one fixed
// window limiter high enough that decisions keep admitting.
func Config() wire.Config {
	return wire.Config{Version: wire.Version, IsolateID: "bench", MaxKeys: 200_000, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 1 << 40, Period: int64(time.Minute)},
	}}
}

// Keys returns n distinct keys.
func Keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = "customer-" + strconv.Itoa(i)
	}
	return ks
}

// Benchmark is one named measurement.
type Benchmark struct {
	Name string
	F    func(b *testing.B)
}

// All lists the benchmarks in the order `edgelimit bench` prints them.
func All() []Benchmark {
	return []Benchmark{
		{"wazero fast path, 1 hot key", func(b *testing.B) { decideWazero(b, 1) }},
		{"wazero fast path, 100k keys", func(b *testing.B) { decideWazero(b, 100_000) }},
		{"native core, 1 hot key", func(b *testing.B) { decideNative(b, 1) }},
		{"native core, 100k keys", func(b *testing.B) { decideNative(b, 100_000) }},
		{"x/time/rate AllowN", xrate},
		{"Extism Go SDK Plugin.Call decide", decideExtismSDK},
		{"Redis per decision: INCR+EXPIRE fixed window", redisFixedWindowBench},
		{"Redis per decision: GCRA Lua script", redisGCRABench},
		{"instantiate isolate", instantiate},
		{"compile module", compile},
	}
}

func newIsolate(b *testing.B) *isolate.Isolate {
	ctx := context.Background()
	rt, err := isolate.NewRuntime(ctx, isolate.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(ctx) })
	iso, err := rt.NewIsolate(ctx, Config(), 1)
	if err != nil {
		b.Fatal(err)
	}
	return iso
}

func decideWazero(b *testing.B, nkeys int) {
	ctx := context.Background()
	iso := newIsolate(b)
	keys := Keys(nkeys)
	for i, k := range keys { // warm the table
		if _, err := iso.Decide(ctx, 0, k, 1, int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := iso.Decide(ctx, 0, keys[i%nkeys], 1, int64(i))
		if err != nil || !d.Allowed {
			b.Fatal(err)
		}
	}
}

func decideNative(b *testing.B, nkeys int) {
	c, err := core.New(Config())
	if err != nil {
		b.Fatal(err)
	}
	keys := make([][]byte, nkeys)
	for i, k := range Keys(nkeys) {
		keys[i] = []byte(k)
	}
	var r core.Result
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Decide(0, keys[i%nkeys], 1, int64(i), &r); err != nil || !r.Allowed {
			b.Fatal(err)
		}
	}
}

func xrate(b *testing.B) {
	lim := rate.NewLimiter(rate.Inf, 1)
	t0 := time.Unix(0, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !lim.AllowN(t0.Add(time.Duration(i)), 1) {
			b.Fatal("denied")
		}
	}
}

func decideExtismSDK(b *testing.B) {
	ctx := context.Background()
	p, err := extism.NewPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm.Module}}},
		extism.PluginConfig{EnableWasi: true}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(ctx)
	cfg := Config()
	if _, _, err := p.Call("configure", cfg.AppendMsg(nil)); err != nil {
		b.Fatal(err)
	}
	q := wire.DecideRequest{Version: wire.Version, Checks: []wire.Check{{Limiter: "api", Key: "customer-0", Cost: 1}}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.Now = int64(i)
		if _, _, err := p.Call("decide", q.AppendMsg(nil)); err != nil {
			b.Fatal(err)
		}
	}
}

func instantiate(b *testing.B) {
	ctx := context.Background()
	rt, err := isolate.NewRuntime(ctx, isolate.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	cfg := Config()
	var mem uint32
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		iso, err := rt.NewIsolate(ctx, cfg, uint64(i))
		if err != nil {
			b.Fatal(err)
		}
		mem = iso.MemoryBytes()
		iso.Close(ctx)
	}
	b.ReportMetric(float64(mem)/1024, "idle-KiB")
	b.ReportMetric(float64(len(wasm.Module))/1000, "module-KB")
}

func compile(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		rt, err := isolate.NewRuntime(ctx, isolate.Options{})
		if err != nil {
			b.Fatal(err)
		}
		rt.Close(ctx)
	}
}
