package core

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A reply's full-window notice (a view of a key not in the batch whose
// current window counted its limit: coordinator/merge/fullnotice.go)
// makes the isolate deny that key at once, without holding the request
// for a lease: for a key it holds, and for one it has not seen (a new
// entry, while the table is under a quarter of its keys).
func TestFullWindowNoticeDeniesLocally(t *testing.T) {
	const t0 = int64(1200e9) // window 2 of 600 s
	for _, known := range []bool{true, false} {
		name := "a key it has not seen"
		if known {
			name = "a key it holds"
		}
		t.Run(name, func(t *testing.T) {
			c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", Limiters: []wire.LimiterConfig{
				{Name: "q", Algorithm: wire.FixedWindow, Limit: 20, Period: 600e9, Mode: wire.Strict}}})
			if err != nil {
				t.Fatal(err)
			}
			var r Result
			if known {
				// b was admitted here in an earlier window.
				if err := c.Decide(0, []byte("b"), 0, t0-700e9, &r); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Decide(0, []byte("a"), 1, t0, &r); err != nil || !r.SyncRetry {
				t.Fatalf("a: %+v, %v; want SyncRetry", r, err)
			}
			must(c.SyncOut(t0, nil))
			w := t0 / 600e9
			rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0 + 20e6, Entries: []wire.View{
				{Limiter: "q", Key: "a", Window: w, Count: 3, Lease: 1, Isolates: 2, Life: 1e9},
				{Limiter: "q", Key: "b", Window: w, Count: 20, Lease: -1, Isolates: 5, Exhausted: true}}}
			if err := c.SyncIn(rp.AppendMsg(nil), t0+40e6); err != nil {
				t.Fatal(err)
			}
			// Within two sync intervals of the reply (past them, a
			// denial from the cache is checked with a sync first: recheck).
			at := t0 + 100e6
			if err := c.Decide(0, []byte("b"), 1, at, &r); err != nil {
				t.Fatal(err)
			}
			if r.Allowed || r.SyncRetry || r.RetryAfter != (w+1)*600e9-at {
				t.Fatalf("b after the notice: %+v; want denied until the window ends, without SyncRetry", r)
			}
			if b, _ := c.SyncOut(t0+150e6, nil); len(b) != 0 {
				// a's unit is reported lazily; nothing asks for b.
				var got wire.Batch
				if err := got.UnmarshalMsg(b); err != nil {
					t.Fatal(err)
				}
				for _, e := range got.Entries {
					if e.Key == "b" && e.Demand > 0 {
						t.Fatalf("the next batch asks for b: %+v", e)
					}
				}
			}
			// A notice of a window already over changes nothing.
			if err := c.Decide(0, []byte("b"), 1, (w+1)*600e9, &r); err != nil || !r.SyncRetry {
				t.Fatalf("b in the next window: %+v, %v; want SyncRetry", r, err)
			}
		})
	}
}

// Notices of keys the isolate does not hold take at most a quarter of its
// key table (Config.MaxKeys): past it they are not kept, and nothing is
// evicted for them.
func TestFullWindowNoticesBoundedInTheTable(t *testing.T) {
	const t0 = noticeT0
	c, w := heldOnA(t, 8)
	var r Result
	rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0 + 20e6, Entries: []wire.View{
		{Limiter: "q", Key: "a", Window: w, Count: 3, Lease: 1, Isolates: 2, Life: 1e9}}}
	for _, k := range []string{"n1", "n2", "n3", "n4"} {
		rp.Entries = append(rp.Entries, wire.View{Limiter: "q", Key: k, Window: w, Count: 20, Lease: -1, Isolates: 5, Exhausted: true})
	}
	if err := c.SyncIn(rp.AppendMsg(nil), t0+40e6); err != nil {
		t.Fatal(err)
	}
	if keys := c.Stats().Keys; keys != 2 {
		t.Fatalf("%d keys held after 4 notices with a table of 8 holding 1; want 2 (a quarter)", keys)
	}
	if err := c.Decide(0, []byte("n1"), 1, t0+100e6, &r); err != nil || r.Allowed || r.SyncRetry {
		t.Fatalf("n1, kept: %+v, %v; want denied locally", r, err)
	}
	if err := c.Decide(0, []byte("n2"), 1, t0+100e6, &r); err != nil || !r.SyncRetry {
		t.Fatalf("n2, not kept: %+v, %v; want SyncRetry", r, err)
	}
}

// A notice of a limiter this isolate does not run (the coordinator's
// configuration has more) is skipped; the rest of the reply applies. Any
// other view of an unknown limiter still refuses the reply.
func TestFullWindowNoticeOfUnknownLimiterSkipped(t *testing.T) {
	const t0 = noticeT0
	for _, notice := range []bool{true, false} {
		c, w := heldOnA(t, 0)
		var r Result
		other := wire.View{Limiter: "other-app", Key: "k", Window: w, Count: 20, Lease: -1, Isolates: 5, Exhausted: notice}
		rp := wire.Reply{Version: wire.Version, Seq: 1, At: t0 + 20e6, Entries: []wire.View{
			other, {Limiter: "q", Key: "a", Window: w, Count: 3, Lease: 1, Isolates: 2, Life: 1e9}}}
		err := c.SyncIn(rp.AppendMsg(nil), t0+40e6)
		if notice && err != nil {
			t.Fatalf("a reply with a notice of another limiter refused: %v", err)
		}
		if !notice && err == nil {
			t.Fatal("a reply with a view of an unknown limiter applied")
		}
		if notice {
			if err := c.Decide(0, []byte("a"), 1, t0+50e6, &r); err != nil || !r.Allowed {
				t.Fatalf("a after the reply: %+v, %v; want admitted on its lease", r, err)
			}
		}
	}
}

// noticeT0 is the time (ns) heldOnA cuts its batch at: window 2 of 600 s.
const noticeT0 = int64(1200e9)

// heldOnA returns an isolate of a strict 20 per 600 s limiter q (maxKeys
// keys; 0: the default) whose batch, cut at noticeT0, asks for key a, and
// that batch's window.
func heldOnA(t *testing.T, maxKeys int64) (*Core, int64) {
	t.Helper()
	c, err := New(wire.Config{Version: wire.Version, IsolateID: "i", MaxKeys: maxKeys, Limiters: []wire.LimiterConfig{
		{Name: "q", Algorithm: wire.FixedWindow, Limit: 20, Period: 600e9, Mode: wire.Strict}}})
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := c.Decide(0, []byte("a"), 1, noticeT0, &r); err != nil || !r.SyncRetry {
		t.Fatalf("a: %+v, %v; want SyncRetry", r, err)
	}
	must(c.SyncOut(noticeT0, nil))
	return c, noticeT0 / 600e9
}
