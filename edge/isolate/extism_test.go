package isolate

import (
	"context"
	"testing"

	"github.com/edgelimit/edgelimit/wasm"
	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
	extism "github.com/extism/go-sdk"
)

// TestExtismSDKMatchesNativeCore loads the committed module in the real
// Extism Go SDK (a host nobody here wrote), drives its Extism-style exports
// with msgpack, and checks the decisions and the sync batch against the
// native core, and against this package's own Extism kernel.
func TestExtismSDKMatchesNativeCore(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig("iso-x")
	plugin, err := extism.NewPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm.Module}}},
		extism.PluginConfig{EnableWasi: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plugin.Close(ctx)
	if code, _, err := plugin.Call("configure", cfg.AppendMsg(nil)); err != nil || code != 0 {
		t.Fatalf("configure: code %d, %v", code, err)
	}
	_, iso := newTestIsolate(t, cfg, Options{})
	if _, err := iso.CallExtism(ctx, "configure", cfg.AppendMsg(nil)); err != nil {
		t.Fatal(err)
	}
	native, _ := core.New(cfg)

	now := int64(5e9)
	var r core.Result
	for step := 0; step < 300; step++ {
		now += int64(step%5) * 40e6
		q := wire.DecideRequest{Version: wire.Version, Now: now, Checks: []wire.Check{
			{Limiter: cfg.Limiters[step%5].Name, Key: "k" + string(rune('a'+step%3)), Cost: int64(step % 3)},
		}}
		if step%4 == 0 { // a multi-limiter check, all or nothing
			q.Checks = append(q.Checks, wire.Check{Limiter: "fixed", Key: "global", Cost: 1})
		}
		in := q.AppendMsg(nil)
		code, out, err := plugin.Call("decide", in)
		if err != nil || code != 0 {
			t.Fatalf("step %d: extism decide: code %d, %v", step, code, err)
		}
		var got wire.Decision
		if err := got.UnmarshalMsg(out); err != nil {
			t.Fatal(err)
		}
		kout, err := iso.CallExtism(ctx, "decide", in)
		if err != nil {
			t.Fatal(err)
		}
		var kgot wire.Decision
		if err := kgot.UnmarshalMsg(kout); err != nil {
			t.Fatal(err)
		}
		checks := make([]core.Check, len(q.Checks))
		for i, c := range q.Checks {
			checks[i] = core.Check{Limiter: native.LimiterIndex(c.Limiter), Key: []byte(c.Key), Cost: c.Cost}
		}
		if err := native.DecideMulti(checks, now, &r); err != nil {
			t.Fatal(err)
		}
		want := wire.Decision{Allowed: r.Allowed, Limit: r.Limit, Remaining: r.Remaining, Reset: r.Reset,
			RetryAfter: r.RetryAfter, SyncWanted: r.SyncWanted, SyncRetry: r.SyncRetry, Limiter: cfg.Limiters[r.Limiter].Name}
		if got != want || kgot != want {
			t.Fatalf("step %d: extism sdk %+v, our kernel %+v, native %+v", step, got, kgot, want)
		}
	}
	// The batches agree byte for byte.
	nowMsg := wire.AppendInt(nil, now)
	_, sdkBatch, err := plugin.Call("sync_out", nowMsg)
	if err != nil {
		t.Fatal(err)
	}
	nativeBatch, err := native.SyncOut(now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sdkBatch) == 0 || string(sdkBatch) != string(nativeBatch) {
		t.Fatalf("sync_out: extism %d bytes, native %d bytes, differ", len(sdkBatch), len(nativeBatch))
	}
	// Errors come back through the Extism error channel, not as traps.
	bad := (&wire.DecideRequest{Version: wire.Version, Now: now, Checks: []wire.Check{{Limiter: "nope", Key: "k", Cost: 1}}}).AppendMsg(nil)
	if _, _, err := plugin.Call("decide", bad); err == nil {
		t.Fatal("unknown limiter: no error from the Extism SDK")
	}
	if _, err := iso.CallExtism(ctx, "decide", bad); err == nil {
		t.Fatal("unknown limiter: no error from our kernel")
	}
	if _, _, err := plugin.Call("decide", []byte{0xc1, 0xff}); err == nil {
		t.Fatal("malformed msgpack: no error")
	}
	if code, _, err := plugin.Call("decide", in3()); err != nil || code != 0 {
		t.Fatalf("plugin unusable after errors: %d %v", code, err)
	}
}

func in3() []byte {
	return (&wire.DecideRequest{Version: wire.Version, Now: 1, Checks: []wire.Check{{Limiter: "fixed", Key: "z", Cost: 1}}}).AppendMsg(nil)
}
