package core

import (
	"math"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A host whose clock was ahead by 1.5 s steps back to the coordinator's
// time after a lease was granted: the lease must end when it would have
// ended on the clock it was granted on, 1 s after the cut in real time,
// not 1.5 s later (past the coordinator's record of it: life plus a 1 s
// grace from its grant). Both when the step comes after the reply and
// while the batch is in flight (the reply's lease counts from a cut made
// on the clock before the step); told by the host (ClockOffset) or not
// (the module sees the time go back, and measures the step short by the
// real time between the two calls: 50 ms here).
func TestLeaseEndsOnTimeAfterClockStepsBack(t *testing.T) {
	const (
		t0    = int64(100e9) // real time of the cut, ns
		ahead = int64(1.5e9) // the host's clock before the step
		life  = int64(1e9)
	)
	w := (t0 + ahead) / 10e9 // a 10 s window: every time below is in it
	for _, tc := range []struct {
		inFlight, told bool
		slack          int64 // ns the lease may outlast its real end by
	}{{false, true, 0}, {true, true, 0}, {false, false, 50e6}, {true, false, 50e6}} {
		inFlight := tc.inFlight
		name := "step after the reply"
		if inFlight {
			name = "step while the batch is in flight"
		}
		if !tc.told {
			name += ", not told"
		}
		t.Run(name, func(t *testing.T) {
			c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
				{Name: "s", Algorithm: wire.FixedWindow, Limit: 1000, Period: 10e9, Mode: wire.Strict}}})
			if err != nil {
				t.Fatal(err)
			}
			step := func() {
				if tc.told {
					c.ClockOffset(-ahead)
				}
			}
			c.ClockOffset(0)
			var r Result
			if err := c.Decide(0, []byte("k"), 1, t0+ahead, &r); err != nil || !r.SyncRetry {
				t.Fatalf("first decision: %+v, %v; want SyncRetry", r, err)
			}
			must(c.SyncOut(t0+ahead, nil))
			replyAt := t0 + ahead + 40e6
			if inFlight {
				// The first reading of the coordinator's time: the host's
				// next call is on it.
				step()
				if err := c.Decide(0, []byte("other"), 0, t0+10e6, &r); err != nil {
					t.Fatal(err)
				}
				replyAt = t0 + 40e6
			}
			rp := wire.Reply{Version: wire.Version, Seq: 1, At: replyAt - 20e6, Entries: []wire.View{
				{Limiter: "s", Key: "k", Window: w, Lease: 500, Isolates: 1, Life: life}}}
			if err := c.SyncIn(rp.AppendMsg(nil), replyAt); err != nil {
				t.Fatal(err)
			}
			admitted, last := 0, int64(0)
			for real := t0 + 50e6; real < t0+ahead+life; real += 50e6 {
				now := real
				if !inFlight && real < t0+200e6 {
					now = real + ahead // still on the clock ahead
				} else if !inFlight && real == t0+200e6 {
					step()
				}
				if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					admitted++
					last = real
				}
			}
			if admitted == 0 {
				t.Fatal("nothing admitted under the lease")
			}
			if last >= t0+life+tc.slack {
				t.Fatalf("admitted under the lease at %d ms after the cut (real time); it ended at %d ms",
					(last-t0)/1e6, life/1e6)
			}
		})
	}
}

// A bucket moves with a step the host told: after the offset steps back
// by 5 s, the bucket refills from where it was on the old clock, no more
// and no sooner. A step seen from the times alone leaves it where it was
// (time stays clamped at its latest for the key), since it may be calls
// that read the clock out of order.
func TestBucketMovesWithToldStep(t *testing.T) {
	for _, told := range []bool{true, false} {
		c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
			{Name: "b", Algorithm: wire.TokenBucket, Limit: 10, Period: 1e9, Burst: 10}}})
		if err != nil {
			t.Fatal(err)
		}
		var r Result
		const t0 = int64(100e9)
		for i := 0; i < 10; i++ {
			if err := c.Decide(0, []byte("k"), 1, t0, &r); err != nil || !r.Allowed {
				t.Fatalf("burst %d: %+v, %v", i, r, err)
			}
		}
		if told {
			c.ClockOffset(-5e9)
		}
		admitted := 0
		at := t0 - 5e9 + 250e6 // 250 ms later in real time: 2 units refilled
		for i := 0; i < 5; i++ {
			if err := c.Decide(0, []byte("k"), 1, at, &r); err != nil {
				t.Fatal(err)
			}
			if r.Allowed {
				admitted++
			}
		}
		want := 2
		if !told {
			want = 0 // clamped at t0 until the clock gets back there
		}
		if admitted != want {
			t.Fatalf("told %v: admitted %d 250 ms after emptying the bucket, want %d", told, admitted, want)
		}
	}
}

// A batch in flight keeps its time through a step back: its amendment and
// its resends carry the time it was cut with (the coordinator tells a
// retry from another batch of the same number by its content, time
// included: another time would be refused as a conflict, and a batch
// applied whose reply was lost would then be counted again under a new
// incarnation).
func TestBatchKeepsItsTimeThroughAStep(t *testing.T) {
	for _, told := range []bool{true, false} {
		c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
			{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: 10e9, Mode: wire.Strict}}})
		if err != nil {
			t.Fatal(err)
		}
		const t0, ahead = int64(100e9), int64(1.5e9)
		var r Result
		if err := c.Decide(0, []byte("a"), 1, t0+ahead, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%+v, %v", r, err)
		}
		var b, am, again wire.Batch
		if err := b.UnmarshalMsg(must(c.SyncOut(t0+ahead, nil))); err != nil {
			t.Fatal(err)
		}
		if told {
			c.ClockOffset(-ahead)
		}
		if err := c.Decide(0, []byte("b"), 1, t0+10e6, &r); err != nil || !r.SyncRetry {
			t.Fatalf("%+v, %v", r, err)
		}
		out := must(c.Amend(t0+10e6, nil))
		if len(out) == 0 {
			t.Fatal("no amendment")
		}
		if err := am.UnmarshalMsg(out); err != nil {
			t.Fatal(err)
		}
		if err := again.UnmarshalMsg(must(c.SyncOut(t0+20e6, nil))); err != nil {
			t.Fatal(err)
		}
		if am.At != b.At || again.At != b.At {
			t.Fatalf("told %v: batch at %d, amendment at %d, resend at %d; want one time", told, b.At, am.At, again.At)
		}
	}
}

// Offsets at the ends of int64 (a host's bad input through the ABI) do not
// overflow: a step back past every time kept voids every lease.
func TestClockOffsetExtremes(t *testing.T) {
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: 10e9, Mode: wire.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	const t0 = int64(100e9)
	var r Result
	if err := c.Decide(0, []byte("k"), 1, t0, &r); err != nil || !r.SyncRetry {
		t.Fatalf("%+v, %v", r, err)
	}
	must(c.SyncOut(t0, nil))
	rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0, Entries: []wire.View{
		{Limiter: "s", Key: "k", Window: t0 / 10e9, Lease: 50, Isolates: 1, Life: 1e9}}}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+1e6); err != nil {
		t.Fatal(err)
	}
	c.ClockOffset(math.MaxInt64)
	c.ClockOffset(math.MinInt64)
	if err := c.Decide(0, []byte("k"), 1, t0+2e6, &r); err != nil || r.Allowed {
		t.Fatalf("after a step back past every time: %+v, %v; want the lease void", r, err)
	}
}

// A host 30 s ahead of the coordinator cuts batch 1 (a held strict request)
// and amends it; the amendment's lease comes back with batch 1's reply.
// Batch 2 is refused for its times, the host steps back 30 s and takes it
// back (Recall), which restores the cut times of before batch 2: they must
// be on the new clock too. A lease granted on a reply to batch 1 ends its
// life (5 s) after batch 1's cut, on either clock: before, Recall put back
// cut times of the old clock, and such a lease ended 34.8 s after now.
func TestRecallRestoresCutTimesOnTheNewClock(t *testing.T) {
	const sec = int64(1e9)
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
		{Name: "s", Algorithm: wire.FixedWindow, Limit: 100, Period: 60 * sec, Mode: wire.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	t0 := 1000*60*sec + 40*sec // 40 s into a minute, 30 s ahead of the coordinator
	if err := c.Decide(0, []byte("k"), 1, t0, &r); err != nil || !r.SyncRetry {
		t.Fatal(r, err)
	}
	if b, _ := c.SyncOut(t0, nil); len(b) == 0 {
		t.Fatal("batch 1 was not cut")
	}
	if err := c.Decide(0, []byte("k"), 1, t0+1e6, &r); err != nil || !r.SyncRetry {
		t.Fatal(r, err)
	}
	if b, _ := c.Amend(t0+1e6, nil); len(b) == 0 {
		t.Fatal("batch 1 was not amended")
	}
	rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0 + 20e6, Entries: []wire.View{
		{Limiter: "s", Key: "k", Window: t0 / (60 * sec), Count: 0, Lease: 1, Isolates: 1, Life: 5 * sec}}}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+40e6); err != nil {
		t.Fatal(err)
	}
	c.Decide(0, []byte("k"), 1, t0+50e6, &r)
	c.Decide(0, []byte("k"), 1, t0+50e6, &r)
	if b, _ := c.SyncOut(t0+100e6, nil); len(b) == 0 {
		t.Fatal("batch 2 was not cut")
	}
	c.ClockOffset(-30 * sec) // the refusal's reading: 30 s back
	now := t0 + 200e6 - 30*sec
	if err := c.Recall(now, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := c.SyncOut(now, nil); len(b) == 0 {
		t.Fatal("batch 2 was not cut again")
	}
	// The amendment's reply, after the cut again.
	ar := wire.Reply{Version: wire.Version, Seq: 1, At: now + 10e6, Entries: []wire.View{
		{Limiter: "s", Key: "k", Window: now / (60 * sec), Count: 1, Lease: 5, Isolates: 1, Life: 5 * sec}}}
	if err := c.SyncIn(ar.AppendMsg(nil), now+20e6); err != nil {
		t.Fatalf("the amendment's reply after the cut again: %v", err)
	}
	e := c.tab.at(c.tab.find(0, []byte("k"), hashKey(0, []byte("k"))))
	// Batch 1 was cut 200 ms before now on the new clock.
	if s := c.tab.lease(e); !s.hasLease || s.expires-now > 5*sec-200e6 {
		t.Errorf("the amendment's lease (granted %v) ends %.2f s after now, want at most 4.80 s (batch 1's cut + its life of 5 s)",
			s.hasLease, float64(s.expires-now)/1e9)
	}
	if c.prevCut > now || c.cutAt > now {
		t.Errorf("cut times after the recall are ahead of the clock: prevCut %+d ns, cutAt %+d ns from now", c.prevCut-now, c.cutAt-now)
	}
}
