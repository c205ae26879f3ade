//go:build !wasip1

// The reset tests use the coordinator-backed fleet of upstream_test.go (a
// host package, not built for wasip1).

package core_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A key reset at the coordinator is admitted again by every isolate after
// one sync, also by those that only deny it from what they cached (a dry
// spell, a full window) and so have nothing of it to report: requests
// denied from the cache make their next sync a heartbeat, and the reply
// names the key. Without requests since its last batch, none is sent.
func TestResetReachesDenyingIsolates(t *testing.T) {
	for _, mode := range []string{wire.Approximate, wire.Auto} {
		t.Run(mode, func(t *testing.T) {
			lc := wire.LimiterConfig{Name: "llm", Algorithm: wire.FixedWindow, Limit: 5, Period: 3600 * sec, Mode: mode}
			f := newUpFleet(t, lc, 4, false)
			now := 7200*sec + sec
			admitted := 0
			for round := 0; round < 6; round++ {
				for i := range f.isos {
					if r := f.decide(i, "k", now); r.Allowed {
						admitted++
					}
					f.sync(i, now+1)
					now += sec / 10
				}
			}
			if admitted < 5 {
				t.Fatalf("admitted %d before the reset, want the limit (5)", admitted)
			}
			for i := range f.isos {
				if r := f.decide(i, "k", now); r.Allowed {
					t.Fatalf("isolate %d admits before the reset: %+v", i, r)
				}
			}
			if err := f.m.ResetAt("llm", "k", now); err != nil {
				t.Fatal(err)
			}
			if err := f.m.Commit(now); err != nil {
				t.Fatal(err)
			}
			for i := range f.isos {
				// A request after the reset, denied from the cache:
				// the second denial since the isolate's last batch
				// makes its next sync a heartbeat.
				if r := f.decide(i, "k", now); r.Allowed {
					t.Fatalf("isolate %d admits before it heard of the reset: %+v", i, r)
				}
				if !f.sync(i, now+1) {
					t.Fatalf("isolate %d denied twice from its cache but sent no heartbeat", i)
				}
				for _, d := range f.last.Entries { // an idle isolate's recheck names the key, reporting nothing
					if d.Delta != 0 || d.Demand != 0 {
						t.Errorf("isolate %d's heartbeat carries %+v", i, f.last.Entries)
					}
				}
			}
			for i := range f.isos {
				r := f.decide(i, "k", now+2)
				if r.SyncRetry { // a lease to ask for: one sync
					f.sync(i, now+3)
					r = f.decide(i, "k", now+4)
				}
				if !r.Allowed {
					t.Errorf("isolate %d after the reset and one sync: %+v, want allowed", i, r)
				}
			}
		})
	}
}

// A reply with values the isolate could not have been sent (a window or a
// TAT of MaxInt64, a negative count, an absurd pause) is refused whole:
// the batch stays outstanding, and the next honest reply is applied.
func TestImpossibleRepliesRefused(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso", Limiters: []wire.LimiterConfig{
		{Name: "w", Algorithm: wire.FixedWindow, Limit: 10, Period: sec, Mode: wire.Auto},
		{Name: "b", Algorithm: wire.TokenBucket, Limit: 10, Period: sec},
	}}
	now := 100 * sec
	bad := []wire.View{
		{Limiter: "w", Key: "k", Window: math.MaxInt64, Lease: 5, Isolates: 1},
		{Limiter: "w", Key: "k", Window: 100, Count: -1, Lease: 5, Isolates: 1},
		{Limiter: "w", Key: "k", Window: 100, Lease: 1 << 40, Isolates: 1},
		{Limiter: "w", Key: "k", Window: 100, Lease: 5, Isolates: 1, Held: -1},
		{Limiter: "w", Key: "k", Window: 100, Lease: 5, Isolates: 1, Held: 11}, // more than the limit of 10
		{Limiter: "b", Key: "k", TAT: math.MaxInt64, Lease: -1, Isolates: 1},
		{Limiter: "b", Key: "k", TAT: -5, Lease: -1, Isolates: 1},
	}
	for _, v := range bad {
		c := newCore(t, cfg)
		var r wire.Result
		lim := c.LimiterIndex(v.Limiter)
		if err := c.Decide(lim, []byte("k"), 1, now, &r); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SyncOut(now, nil); err != nil {
			t.Fatal(err)
		}
		rp := wire.Reply{Version: wire.Version, Seq: 1, At: now, Entries: []wire.View{v}}
		if err := c.SyncIn(rp.AppendMsg(nil), now+1); err == nil {
			t.Errorf("view %+v accepted", v)
			continue
		}
		if !c.Outstanding() {
			t.Fatalf("view %+v: the refused reply ended the batch", v)
		}
		// The honest reply is applied and the key admits.
		good := wire.View{Limiter: v.Limiter, Key: "k", Window: 100, Count: 1, Lease: 5, Isolates: 1, Life: sec}
		if v.Limiter == "b" {
			good = wire.View{Limiter: "b", Key: "k", TAT: now + sec/10, Lease: -1, Isolates: 1}
		}
		rp.Entries = []wire.View{good}
		if err := c.SyncIn(rp.AppendMsg(nil), now+2); err != nil {
			t.Fatalf("honest reply after %+v: %v", v, err)
		}
		if err := c.Decide(lim, []byte("k"), 1, now+3, &r); err != nil || !r.Allowed {
			t.Errorf("after an honest reply (bad one was %+v): %+v, %v", v, r, err)
		}
	}
	for _, u := range []wire.UpView{{Limiter: "w", Key: "k", Pause: math.MaxInt64}, {Limiter: "w", Key: "k", Circuit: 7},
		{Limiter: "w", Key: "k", Limit: -1}} {
		c := newCore(t, cfg)
		var r wire.Result
		if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SyncOut(now, nil); err != nil {
			t.Fatal(err)
		}
		rp := wire.Reply{Version: wire.Version, Seq: 1, At: now, Upstream: []wire.UpView{u},
			Entries: []wire.View{{Limiter: "w", Key: "k", Window: 100, Count: 1, Lease: 5, Isolates: 1}}}
		if err := c.SyncIn(rp.AppendMsg(nil), now+1); err == nil {
			t.Errorf("upstream view %+v accepted", u)
		}
	}
}

// A limit the fleet told an isolate lasts only as long as its life, and
// only until a reply for the key says nothing of it: a forged limit of 1
// is lifted by the next honest reply, and the denials under it sync.
func TestFleetLimitLifted(t *testing.T) {
	lc := wire.LimiterConfig{Name: "w", Algorithm: wire.FixedWindow, Limit: 10, Period: sec}
	c := newCore(t, wire.Config{Version: wire.Version, IsolateID: "iso", Limiters: []wire.LimiterConfig{lc}})
	now := 100 * sec
	var r wire.Result
	sync := func(up []wire.UpView) {
		t.Helper()
		out, err := c.SyncOut(now, nil)
		if err != nil || len(out) == 0 {
			t.Fatalf("no batch to answer: %v", err)
		}
		var b wire.Batch
		if err := b.UnmarshalMsg(out); err != nil {
			t.Fatal(err)
		}
		rp := wire.Reply{Version: wire.Version, Seq: b.Seq, At: now, Upstream: up,
			Entries: []wire.View{{Limiter: "w", Key: "k", Window: now / sec, Count: 1, Lease: -1, Isolates: 1}}}
		if err := c.SyncIn(rp.AppendMsg(nil), now); err != nil {
			t.Fatal(err)
		}
	}
	decide := func() wire.Result {
		if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	decide()
	sync([]wire.UpView{{Limiter: "w", Key: "k", Limit: 1, Life: 3600 * sec}}) // the forgery
	if r := decide(); r.Allowed || r.Limit != 1 {
		t.Fatalf("under the forged limit: %+v, want denied at limit 1", r)
	}
	sync(nil) // an honest reply: no upstream state for the key
	if r := decide(); !r.Allowed || r.Limit != 10 {
		t.Fatalf("after an honest reply: %+v, want allowed at limit 10", r)
	}
	// A limit's life ends it without any reply.
	sync([]wire.UpView{{Limiter: "w", Key: "k", Limit: 2, Life: 2 * sec}})
	if r := decide(); r.Limit != 2 {
		t.Fatalf("told a limit of 2: %+v", r)
	}
	now += 3 * sec
	if r := decide(); r.Limit != 10 {
		t.Fatalf("past the limit's life: %+v, want limit 10", r)
	}
}

func newCore(t *testing.T, cfg wire.Config) *core.Core {
	t.Helper()
	c, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An isolate that has not heard from its coordinator for two sync
// intervals does not deny from what it cached: the request is answered
// SyncRetry, the next sync goes out even with nothing else to report, and
// the request decided again after it is admitted when the key was reset,
// denied without another sync when it was not. An isolate that heard
// within two intervals denies from its cache at once. The same holds with
// a coordinator that sends no reset notices (the shared mode over Redis):
// the recheck's batch names the key, and its reply carries the key's view
// after the reset.
func TestIdleIsolateRechecksCachedDenial(t *testing.T) {
	for _, tc := range []struct {
		mode      string
		noNotices bool
	}{{wire.Approximate, false}, {wire.Auto, false}, {wire.Approximate, true}, {wire.Auto, true}} {
		mode := tc.mode
		t.Run(fmt.Sprintf("%s/notices=%v", mode, !tc.noNotices), func(t *testing.T) {
			lc := wire.LimiterConfig{Name: "llm", Algorithm: wire.FixedWindow, Limit: 5, Period: 3600 * sec, Mode: mode}
			f := newUpFleetWith(t, lc, 2, false, merge.MergerOptions{NoResetNotices: tc.noNotices})
			now := 7200*sec + sec
			admitted := 0
			for round := 0; round < 10; round++ {
				for i := range f.isos {
					r := f.decide(i, "k", now)
					if r.SyncRetry { // a lease to ask for
						f.sync(i, now+1)
						r = f.decide(i, "k", now+2)
					}
					if r.Allowed {
						admitted++
					}
					f.sync(i, now+3)
					now += sec / 20
				}
			}
			if admitted < 4 || admitted > 5 {
				t.Fatalf("admitted %d, want about the limit (5)", admitted)
			}
			// Heard 1 ms ago: the denial comes from the cache.
			for i := range f.isos {
				f.sync(i, now) // a pending lease ask, if any
				r := f.decide(i, "k", now+1)
				if r.Allowed && mode == wire.Approximate { // the last unit, admitted on the estimate
					f.sync(i, now+2)
					r = f.decide(i, "k", now+3)
				}
				if r.Allowed || r.SyncRetry {
					t.Fatalf("isolate %d, fresh view of a full window: %+v, want a denial without SyncRetry", i, r)
				}
			}
			// Idle for 3 default sync intervals (300 ms), not reset:
			// one sync confirms the denial.
			now += 3 * sec / 10
			r := f.decide(0, "k", now)
			if r.Allowed || !r.SyncRetry {
				t.Fatalf("idle isolate's cached denial: %+v, want SyncRetry", r)
			}
			if !f.sync(0, now+1) {
				t.Fatal("a recheck sent no batch")
			}
			if r := f.decide(0, "k", now+2); r.Allowed || r.SyncRetry {
				t.Fatalf("after the recheck of a key not reset: %+v, want a denial without SyncRetry", r)
			}
			// Reset, then idle isolates: the first request after two
			// intervals syncs and is admitted.
			if err := f.m.ResetAt("llm", "k", now+3); err != nil {
				t.Fatal(err)
			}
			if err := f.m.Commit(now + 3); err != nil {
				t.Fatal(err)
			}
			now += 3 * sec / 10
			for i := range f.isos {
				r := f.decide(i, "k", now)
				if r.Allowed || !r.SyncRetry {
					t.Fatalf("isolate %d, first request after the reset: %+v, want SyncRetry", i, r)
				}
				for try := 0; try < 3 && r.SyncRetry; try++ { // a lease to ask for: another sync
					f.sync(i, now+1)
					now += 2
					r = f.decide(i, "k", now)
				}
				if !r.Allowed {
					t.Errorf("isolate %d after the reset and its recheck: %+v, want allowed", i, r)
				}
			}
		})
	}
}
