package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// remaining counts as used what the others' pace (wire.View.Pace) says
// they admitted since the view: since it was made, or, on a view of an
// earlier window, since this window began; the answer itself stays the
// lease's. Without a pace (a coordinator that sends none) it is the view's.
func TestRemainingCountsTheOthersPace(t *testing.T) {
	const P = int64(1e9)
	for _, pace := range []int64{0, 50} {
		c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
			{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: P, Mode: wire.Strict}}})
		if err != nil {
			t.Fatal(err)
		}
		t0 := 1000*P + 100e6 // 100 ms into window 1000
		w := t0 / P
		var r Result
		if err := c.Decide(0, []byte("k"), 1, t0, &r); err != nil || !r.SyncRetry {
			t.Fatalf("pace %d: %+v, %v; want SyncRetry", pace, r, err)
		}
		if b, err := c.SyncOut(t0, nil); err != nil || len(b) == 0 {
			t.Fatalf("pace %d: no batch: %v", pace, err)
		}
		// The reply is made 10 ms after the cut and read 20 ms after it:
		// 30 counted, 10 held by the others, a lease of 10 with a
		// standing lease for the next window.
		rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0 + 10e6, Entries: []wire.View{
			{Limiter: "s", Key: "k", Window: w, Count: 30, Lease: 10, Stand: 5, Isolates: 8, Life: 2 * P, Held: 10, Pace: pace}}}
		if err := c.SyncIn(rp.AppendMsg(nil), t0+20e6); err != nil {
			t.Fatal(err)
		}
		remaining := func(at int64) int64 {
			t.Helper()
			if err := c.Decide(0, []byte("k"), 1, at, &r); err != nil || !r.Allowed {
				t.Fatalf("pace %d at %d ms: %+v, %v; want admitted on the lease", pace, (at-t0)/1e6, r, err)
			}
			return r.Remaining
		}
		// 400 ms after the view: 100 - 30 - 10 held - 1 own, less the
		// others' 50 a second for 0.4 s.
		if got, want := remaining(t0+410e6), 59-pace*4/10; got != want {
			t.Errorf("pace %d, 400 ms after the view: remaining %d, want %d", pace, got, want)
		}
		// 300 ms into the next window, on the standing lease and the old
		// view: 100 - 1 own, less the others' 50 a second for 0.3 s.
		if got, want := remaining((w+1)*P+300e6), 99-pace*3/10; got != want {
			t.Errorf("pace %d, 300 ms into the next window: remaining %d, want %d", pace, got, want)
		}
	}
}
