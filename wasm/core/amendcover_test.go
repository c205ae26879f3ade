package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// An isolate that syncs often (at least four times a window) holds a
// request while its batch is in flight: the batch's reply is expected to
// grant a lease like the last (twice the demand per batch, from the cut
// on), so no amendment asks for the held requests until what they need
// exceeds the last grant; then one asks for all of it. The reply admits
// them. A sparse isolate, whose lease is what it asked for, amends at the
// first held request, and so does a busy one where the window outlives a
// lease's life (the coordinator does not grow a lease that lasted there).
func TestAmendLeavesToTheBatchWhatItsLeaseCovers(t *testing.T) {
	const period = int64(2e9)
	for _, tc := range []struct {
		name     string
		spacing  int64 // ns between the isolate's batches before the test
		life     int64 // the leases' life the replies tell, ns
		frequent bool
	}{{"frequent", 100e6, period, true}, {"sparse", 1500e6, period, false}, {"window longer than a lease's life", 100e6, period / 2, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
				{Name: "s", Algorithm: wire.FixedWindow, Limit: 1000, Period: period, Mode: wire.Strict}}})
			if err != nil {
				t.Fatal(err)
			}
			var r Result
			decide := func(cost, now int64) Result {
				t.Helper()
				if err := c.Decide(0, []byte("k"), cost, now, &r); err != nil {
					t.Fatal(err)
				}
				return r
			}
			cut := func(now int64) {
				t.Helper()
				if out, err := c.SyncOut(now, nil); err != nil || len(out) == 0 {
					t.Fatalf("batch at %d: %d bytes, %v; want one", now, len(out), err)
				}
			}
			reply := func(now, win, lease int64) {
				t.Helper()
				rp := wire.Reply{Version: wire.Version, Seq: c.seq, At: now, Entries: []wire.View{
					{Limiter: "s", Key: "k", Window: win, Lease: lease, Isolates: 4, Life: tc.life}}}
				if err := c.SyncIn(rp.AppendMsg(nil), now); err != nil {
					t.Fatal(err)
				}
			}
			// Batches at the spacing, each reporting 11 of a lease of 20
			// (over half of it: the key is urgent) or, in a new window,
			// asking for it; each granted a lease of 20.
			now := int64(40e9)
			for i := 0; i < 4; i++ {
				if d := decide(11, now); !d.Allowed && !d.SyncRetry {
					t.Fatalf("batch %d: %+v", i, d)
				}
				cut(now)
				reply(now+1e6, now/period, 20)
				now += tc.spacing
			}
			now -= tc.spacing - 2e6 // in the last reply's window
			w := now / period
			// The lease's 20 units, then a batch in flight and held
			// requests.
			if d := decide(20, now); !d.Allowed {
				t.Fatalf("the lease's 20 units: %+v", d)
			}
			cut(now + 1e6)
			if got := c.gap*4 <= period; got != tc.frequent {
				t.Fatalf("gap %d ns: frequent %v, want %v", c.gap, got, tc.frequent)
			}
			if d := decide(1, now+2e6); !d.SyncRetry {
				t.Fatalf("held request: %+v; want SyncRetry", d)
			}
			out, err := c.Amend(now+2e6, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.frequent || tc.life < period {
				if len(out) == 0 {
					t.Fatal("the held request did not amend the batch")
				}
				return
			}
			if len(out) != 0 {
				t.Fatal("an amendment asked for 1 unit within the last grant of 20")
			}
			if d := decide(19, now+3e6); !d.SyncRetry {
				t.Fatalf("held request of 19: %+v; want SyncRetry", d)
			}
			if out, _ := c.Amend(now+3e6, nil); len(out) != 0 {
				t.Fatal("an amendment asked for 20 units within the last grant of 20")
			}
			if d := decide(1, now+4e6); !d.SyncRetry {
				t.Fatalf("third held request: %+v; want SyncRetry", d)
			}
			var am wire.Batch
			if err := am.UnmarshalMsg(must(c.Amend(now+4e6, nil))); err != nil {
				t.Fatal(err)
			}
			if len(am.Asks) != 1 || am.Asks[0] != (wire.Ask{Limiter: "s", Key: "k", Window: w, Cost: 21}) {
				t.Fatalf("amendment asks %+v; want all 21 units held since the cut", am.Asks)
			}
			// The batch's reply grants them: all three admitted.
			reply(now+40e6, w, 21)
			for _, cost := range []int64{1, 19, 1} {
				if d := decide(cost, now+40e6); !d.Allowed {
					t.Fatalf("held request of %d after the reply: %+v; want admitted", cost, d)
				}
			}
		})
	}
}
