package core_test

import (
	"bytes"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// FuzzSyncIn feeds arbitrary reply bytes to a core with an outstanding
// batch. It must never panic; a refused reply changes nothing (the same
// batch is still outstanding); an accepted one ends the batch.
func FuzzSyncIn(f *testing.F) {
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso", MaxKeys: 8, Limiters: []wire.LimiterConfig{
		{Name: "w", Algorithm: wire.SlidingWindow, Limit: 10, Period: sec},
		{Name: "b", Algorithm: wire.TokenBucket, Limit: 10, Period: sec, Mode: wire.Strict},
	}}
	good := wire.Reply{Version: 1, Seq: 1, At: 5, Entries: []wire.View{
		{Limiter: "w", Key: "k", Window: 2, Count: 4, Prev: 9, Lease: -1, Isolates: 2},
		{Limiter: "b", Key: "k", TAT: 3 * sec, Lease: 5, Isolates: 1},
	}}
	f.Add(good.AppendMsg(nil), int64(2*sec))
	f.Add(good.AppendMsg(nil)[:20], int64(0))
	good.Entries[0].Limiter = "zz"
	f.Add(good.AppendMsg(nil), int64(3*sec))
	f.Add([]byte{0x84, 0xa1, 'v', 1, 0xa3, 's', 'e', 'q', 1, 0xa2, 'a', 't', 0, 0xa1, 'e', 0x90}, int64(1))
	// Reset notices, upstream views with lives, and the values a bad
	// proxy sent (a window and a TAT of MaxInt64, a forged limit).
	good.Entries[0].Limiter = "w"
	notice := good
	notice.ResetGen, notice.Resets = 9, []wire.ResetKey{{Limiter: "w", Key: "k"}, {Limiter: "zz", Key: "j"}}
	notice.Upstream = []wire.UpView{{Limiter: "w", Key: "k", Pause: 2 * sec, Limit: 1, Life: sec}}
	f.Add(notice.AppendMsg(nil), int64(2*sec))
	bad := good
	bad.Entries = []wire.View{{Limiter: "w", Key: "k", Window: 1<<63 - 1, Lease: -1, Isolates: 1},
		{Limiter: "b", Key: "k", TAT: 1<<63 - 1, Lease: 5, Isolates: 1}}
	f.Add(bad.AppendMsg(nil), int64(2*sec))
	f.Fuzz(func(t *testing.T, reply []byte, now int64) {
		c, err := core.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var r core.Result
		for i, k := range []string{"k", "j", "k"} {
			if err := c.Decide(i%2, []byte(k), 1, 2*sec+int64(i), &r); err != nil {
				t.Fatal(err)
			}
		}
		out, err := c.SyncOut(2*sec+5, nil)
		if err != nil || len(out) == 0 {
			t.Fatalf("SyncOut: %v", err)
		}
		out = append([]byte(nil), out...)
		if now < 0 {
			now = -now
		}
		if err := c.SyncIn(reply, now); err != nil {
			if !c.Outstanding() {
				t.Fatal("a refused reply ended the outstanding batch")
			}
			again, _ := c.SyncOut(now, nil)
			if !bytes.Equal(again, out) {
				t.Fatal("a refused reply changed the outstanding batch")
			}
			if c.Stats().Replies != 0 || c.Stats().Errors != 1 {
				t.Fatalf("stats after a refused reply: %+v", c.Stats())
			}
		} else if c.Outstanding() {
			t.Fatal("an accepted reply left the batch outstanding")
		}
		// The core still works after whatever the reply did.
		// No reply can make a key wait longer than the longest pause the
		// configuration honours (1 h) plus a period.
		for _, k := range []string{"k", "j", "new"} {
			for lim := range 2 {
				if err := c.Decide(lim, []byte(k), 1, now+3*sec, &r); err != nil {
					t.Fatal(err)
				}
				if r.Remaining < 0 || (r.Allowed && r.RetryAfter != 0) || r.RetryAfter > 3601*sec {
					t.Fatalf("bad result after the reply: %+v", r)
				}
			}
		}
	})
}

// FuzzObserve feeds arbitrary answers to Observe, then decides and cuts a
// batch: nothing panics, a pause never exceeds max_pause, and the batch
// (with its signals) decodes and validates.
func FuzzObserve(f *testing.F) {
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso", MaxKeys: 8, Limiters: []wire.LimiterConfig{
		{Name: "u", Algorithm: wire.FixedWindow, Limit: 10, Period: sec, Upstream: &wire.UpstreamConfig{MaxPause: 60 * sec}},
	}}
	f.Add(int64(429), "Retry-After", "30", "X-RateLimit-Limit", "6")
	f.Add(int64(200), "RateLimit", `"a";r=0;t=5`, "RateLimit-Policy", `"a";q=5;w=1`)
	f.Add(int64(0), "", "", "", "")
	f.Add(int64(503), "retry-after", "Fri, 21 Nov 2025 04:41:00 GMT", "x-ratelimit-reset", "1763700600")
	f.Fuzz(func(t *testing.T, status int64, n1, v1, n2, v2 string) {
		c, err := core.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now := int64(1_763_700_000) * sec
		var o wire.Observed
		err = c.Observe(0, []byte("k"), status, [][2]string{{n1, v1}, {n2, v2}}, false, now, &o)
		if err != nil {
			if status >= 0 && status <= 999 {
				t.Fatalf("a valid status was refused: %v", err)
			}
			return
		}
		if o.Paused < 0 || o.Paused > 60*sec || o.Limit < 1 || o.Limit > 10 {
			t.Fatalf("observed %+v", o)
		}
		var r core.Result
		if err := c.Decide(0, []byte("k"), 1, now+1, &r); err != nil {
			t.Fatal(err)
		}
		out, err := c.SyncOut(now+2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > 0 {
			var b wire.Batch
			if err := b.UnmarshalMsg(out); err != nil {
				t.Fatalf("the batch does not decode: %v", err)
			}
		}
	})
}
