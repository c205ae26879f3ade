package isolate

import (
	"context"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Through the Wasm module: a host 1.5 s ahead cuts a batch, its clock
// offset steps back to the coordinator's time while the batch is in
// flight, and the reply grants a lease of 1 s life. FollowOffset tells the
// module the step before the reply is applied, so the lease ends 1 s after
// the cut in real time. Unfollowed, the module sees only the times, and
// measures the step short by the real time between its two calls (40 ms
// here: the lease would end 40 ms late); before either, it lasted until
// 2.5 s.
func TestFollowOffsetEndsLeaseOnTime(t *testing.T) {
	const (
		t0    = int64(100e9)
		ahead = int64(1.5e9)
		life  = int64(1e9)
	)
	ctx := context.Background()
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso-clock", Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 1000, Period: 10e9, Mode: wire.Strict}}}
	_, iso := newTestIsolate(t, cfg, Options{})
	off := int64(0) // the host's clock: its own (ahead) plus off, 0 until the first reading
	iso.FollowOffset(func() int64 { return off })
	d, err := iso.Decide(ctx, 0, "k", 1, t0+ahead)
	if err != nil || !d.SyncRetry {
		t.Fatalf("first decision: %+v, %v; want SyncRetry", d, err)
	}
	batch, err := iso.SyncOut(ctx, t0+ahead, nil)
	if err != nil || len(batch) == 0 {
		t.Fatalf("sync out: %d bytes, %v", len(batch), err)
	}
	// The reply's answer carries the coordinator's time: the offset steps
	// back before the reply is applied, at real time t0+40ms.
	off = -ahead
	w := (t0 + ahead) / 10e9
	rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0 + 20e6, Entries: []wire.View{
		{Limiter: "s", Key: "k", Window: w, Lease: 500, Isolates: 1, Life: life}}}
	if err := iso.SyncIn(ctx, rp.AppendMsg(nil), t0+40e6); err != nil {
		t.Fatal(err)
	}
	admitted, last := 0, int64(0)
	for real := t0 + 50e6; real < t0+ahead+life; real += 10e6 {
		d, err := iso.Decide(ctx, 0, "k", 1, real)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted, last = admitted+1, real
		}
	}
	if admitted == 0 {
		t.Fatal("nothing admitted under the lease")
	}
	if last >= t0+life {
		t.Fatalf("admitted under the lease %d ms after the cut (real time); it ended at %d ms", (last-t0)/1e6, life/1e6)
	}
}
