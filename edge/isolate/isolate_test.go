package isolate

import (
	"context"
	"errors"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

func testConfig(id string) wire.Config {
	return wire.Config{Version: wire.Version, IsolateID: id, Limiters: []wire.LimiterConfig{
		{Name: "fixed", Algorithm: wire.FixedWindow, Limit: 10, Period: 1e9},
		{Name: "sliding", Algorithm: wire.SlidingWindow, Limit: 10, Period: 1e9},
		{Name: "bucket", Algorithm: wire.TokenBucket, Limit: 10, Period: 1e9, Burst: 5},
		{Name: "gcra", Algorithm: wire.GCRA, Limit: 100, Period: 60e9},
		{Name: "strict", Algorithm: wire.FixedWindow, Limit: 10, Period: 1e9, Mode: wire.Strict},
	}}
}

func newTestIsolate(t testing.TB, cfg wire.Config, opts Options) (*Runtime, *Isolate) {
	t.Helper()
	ctx := context.Background()
	rt, err := NewRuntime(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	iso, err := rt.NewIsolate(ctx, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return rt, iso
}

func TestDecideMatchesNativeCore(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig("iso-1")
	_, iso := newTestIsolate(t, cfg, Options{})
	native, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b", "customer-42", string(make([]byte, wire.MaxKeyLen))}
	var r core.Result
	now := int64(1_700_000_000_000_000_000)
	for step := 0; step < 5000; step++ {
		now += int64(step%7) * 3_000_000
		lim := step % len(cfg.Limiters)
		key := keys[step%len(keys)]
		cost := int64(step % 3)
		got, gerr := iso.Decide(ctx, lim, key, cost, now)
		werr := native.Decide(lim, []byte(key), cost, now, &r)
		if (gerr == nil) != (werr == nil) || (gerr != nil && !errors.Is(gerr, werr)) {
			t.Fatalf("step %d: wasm err %v, native err %v", step, gerr, werr)
		}
		if want := r; got != want {
			t.Fatalf("step %d (%s %q cost %d): wasm %+v, native %+v", step, cfg.Limiters[lim].Name, key, cost, got, r)
		}
	}
}
