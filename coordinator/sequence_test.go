package coordinator

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// syncAs posts b with token (none when empty) and returns the status, the
// decoded reply (200) or problem (otherwise).
func syncAs(t *testing.T, srv *httptest.Server, token string, b *wire.Batch) (int, *wire.Reply, problem) {
	t.Helper()
	var hdr map[string]string
	if token != "" {
		hdr = map[string]string{"Authorization": "Bearer " + token}
	}
	st, body := httpPost(t, srv, MsgpackContentType, b.AppendMsg(nil), hdr)
	if st != 200 {
		return st, nil, decodeProblem(t, body)
	}
	var rp wire.Reply
	if err := rp.UnmarshalMsg(body); err != nil {
		t.Fatal(err)
	}
	return st, &rp, problem{}
}

func fwDelta(key string, d int64) wire.Delta {
	return wire.Delta{Limiter: "fw", Key: key, Window: 1000, Delta: d}
}

// TestOtherTokenCannotTakeOverIsolate: the holder of a second token sends
// batches under the first edge's isolate id, one with seq 2^62; the first
// edge's batches keep counting (each token is its own namespace of ids).
func TestOtherTokenCannotTakeOverIsolate(t *testing.T) {
	c, clk, srv := newTestServer(t, func(o *Options) { o.Tokens = []string{"edge-a", "edge-b"} })
	if st, _, p := syncAs(t, srv, "edge-a", batch("iso-1", 1, clk.now(), fwDelta("k", 1))); st != 200 {
		t.Fatalf("edge a seq 1: %d %+v", st, p)
	}
	// In b's namespace "iso-1" is unknown: a first batch must be seq 1.
	st, _, p := syncAs(t, srv, "edge-b", batch("iso-1", 1<<62, clk.now(), fwDelta("k", 1000)))
	if st != 409 || p.Type != "urn:edgelimit:problem:seq_gap" || p.Field != "seq" {
		t.Fatalf("seq 2^62 from edge b: %d %+v", st, p)
	}
	// b's own seq 1 under the same id is b's isolate: it counts, as b may sync.
	if st, _, p := syncAs(t, srv, "edge-b", batch("iso-1", 1, clk.now(), fwDelta("k", 10))); st != 200 {
		t.Fatalf("edge b seq 1: %d %+v", st, p)
	}
	if st, _, p := syncAs(t, srv, "edge-b", batch("iso-1", 2, clk.now(), fwDelta("k", 100))); st != 200 {
		t.Fatalf("edge b seq 2: %d %+v", st, p)
	}
	// a's next batches are applied: a's seq 2 is not b's seq 2.
	for seq := int64(2); seq <= 3; seq++ {
		st, rp, p := syncAs(t, srv, "edge-a", batch("iso-1", seq, clk.now(), fwDelta("k", 1)))
		if st != 200 {
			t.Fatalf("edge a seq %d: %d %+v", seq, st, p)
		}
		if want := 110 + seq; viewOf(t, rp, "fw", "k").Count != want {
			t.Fatalf("edge a seq %d: count %d, want %d", seq, viewOf(t, rp, "fw", "k").Count, want)
		}
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 113 {
		t.Fatalf("count %d, want 3 from a + 110 from b", ks.Count)
	}
}

// TestSeqJumpRefusedWithoutTokens: in the one namespace of a coordinator
// without tokens, a jumped seq is refused (409) and recorded nowhere, so
// the isolate's next batch still counts; a stale or replayed seq is
// refused too, never a silent 200.
func TestSeqJumpRefusedWithoutTokens(t *testing.T) {
	_, clk, srv := newTestServer(t, nil)
	first := batch("iso-1", 1, clk.now(), fwDelta("k", 1))
	if st, _, p := syncAs(t, srv, "", first); st != 200 {
		t.Fatalf("seq 1: %d %+v", st, p)
	}
	st, _, p := syncAs(t, srv, "", batch("iso-1", 1<<62, clk.now(), fwDelta("k", 1000)))
	if st != 409 || p.Type != "urn:edgelimit:problem:seq_gap" {
		t.Fatalf("seq 2^62: %d %+v", st, p)
	}
	st, _, p = syncAs(t, srv, "", batch("iso-1", 3, clk.now(), fwDelta("k", 1000)))
	if st != 409 || p.Type != "urn:edgelimit:problem:seq_gap" {
		t.Fatalf("seq 3 after 1: %d %+v", st, p)
	}
	st, rp, p := syncAs(t, srv, "", batch("iso-1", 2, clk.now(), fwDelta("k", 2)))
	if st != 200 || viewOf(t, rp, "fw", "k").Count != 3 {
		t.Fatalf("seq 2: %d %+v %+v", st, rp, p)
	}
	// A replay of seq 1 is stale; a retry of seq 2 is answered as today.
	st, _, p = syncAs(t, srv, "", first)
	if st != 409 || p.Type != "urn:edgelimit:problem:seq_stale" {
		t.Fatalf("replayed seq 1: %d %+v", st, p)
	}
	st, rp, _ = syncAs(t, srv, "", batch("iso-1", 2, clk.now(), fwDelta("k", 2)))
	if st != 200 || viewOf(t, rp, "fw", "k").Count != 3 {
		t.Fatalf("retry of seq 2: %d %+v", st, rp)
	}
	// A different batch under seq 2 (a forged one) is a conflict.
	st, _, p = syncAs(t, srv, "", batch("iso-1", 2, clk.now(), fwDelta("k", 500)))
	if st != 409 || p.Type != "urn:edgelimit:problem:seq_conflict" {
		t.Fatalf("other batch as seq 2: %d %+v", st, p)
	}
}

// TestRestartedIsolateStartsNewIncarnation: an isolate restarted with the
// same id sends seq 1 again; it is told so (409, stale after several
// batches, conflict after one), and its deltas count from its first batch
// once it resends them as seq 1 of a new incarnation (what the module's
// Reincarnate does).
func TestRestartedIsolateStartsNewIncarnation(t *testing.T) {
	c, clk, srv := newTestServer(t, nil)
	for _, tc := range []struct {
		id      string
		before  int64 // batches of the first life
		problem string
	}{{"long-lived", 3, "urn:edgelimit:problem:seq_stale"}, {"short-lived", 1, "urn:edgelimit:problem:seq_conflict"}} {
		key := tc.id
		for seq := int64(1); seq <= tc.before; seq++ {
			if st, _, p := syncAs(t, srv, "", batch(tc.id, seq, clk.now(), fwDelta(key, 1))); st != 200 {
				t.Fatalf("%s seq %d: %d %+v", tc.id, seq, st, p)
			}
		}
		clk.add(1e6) // the restarted isolate cuts its first batch later
		restarted := batch(tc.id, 1, clk.now(), fwDelta(key, 5))
		st, _, p := syncAs(t, srv, "", restarted)
		if st != 409 || p.Type != tc.problem {
			t.Fatalf("%s restarted seq 1: %d %+v, want %s", tc.id, st, p, tc.problem)
		}
		restarted.Isolate += "~1"
		st, rp, p := syncAs(t, srv, "", restarted)
		if st != 200 || viewOf(t, rp, "fw", key).Count != tc.before+5 {
			t.Fatalf("%s new incarnation seq 1: %d %+v %+v", tc.id, st, rp, p)
		}
	}
	if s := c.mergeStats(); s.SeqRefused != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestFutureWindowRefused: a window ahead of the coordinator's clock past
// the allowed skew is refused (400 naming the field), and one that no
// clock could put that far from its batch's time (an edge running the
// limiter with another period, or a forged one: periodmismatch.go) is not
// counted; neither can switch the key off. A window one ahead (a clock
// within the allowed skew) is accepted.
func TestFutureWindowRefused(t *testing.T) {
	c, clk, srv := newTestServer(t, nil)
	cur := clk.now() / sec
	st, uncounted, _ := syncUncounted(t, srv, "", batch("forger", 1, clk.now(),
		wire.Delta{Limiter: "fw", Key: "k", Window: cur + 1e9, Delta: 1}))
	if st != 200 || uncounted != "fw" {
		t.Fatalf("window now+1e9: %d, uncounted %q; want 200 and fw uncounted", st, uncounted)
	}
	st, _, p := syncAs(t, srv, "", batch("attacker", 1, clk.now(),
		wire.Delta{Limiter: "fw", Key: "k", Window: cur + 3600, Delta: 1}))
	if st != 400 || p.Field != "e[0].window" || p.Type != "urn:edgelimit:problem:clock_skew" {
		t.Fatalf("window an hour ahead: %d %+v", st, p)
	}
	st, _, p = syncAs(t, srv, "", batch("attacker", 1, clk.now()+3600*sec, fwDelta("k", 1)))
	if st != 400 || p.Field != "at" || p.Type != "urn:edgelimit:problem:clock_skew" {
		t.Fatalf("batch time now+1h: %d %+v", st, p)
	}
	maxWin := min(limitmath.Window(clk.now(), sec)+1, limitmath.Window(clk.now()+int64(merge.DefaultMaxClockSkew), sec))
	st, _, p = syncAs(t, srv, "", batch("attacker", 1, clk.now(),
		wire.Delta{Limiter: "fw", Key: "k2", Window: maxWin + 1, Delta: 1}))
	if st != 400 || p.Field != "e[0].window" {
		t.Fatalf("window just past the skew: %d %+v", st, p)
	}
	// Nothing of the refused batches was applied: honest deltas count.
	for seq := int64(1); seq <= 2; seq++ {
		st, rp, p := syncAs(t, srv, "", batch("honest", seq, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: cur, Delta: 1}))
		if st != 200 || viewOf(t, rp, "fw", "k").Count != seq {
			t.Fatalf("honest seq %d: %d %+v %+v", seq, st, rp, p)
		}
	}
	if st, _, p := syncAs(t, srv, "", batch("ahead", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k3", Window: maxWin, Delta: 1})); st != 200 {
		t.Fatalf("window at the skew bound: %d %+v", st, p)
	}
	if ks := getKey(t, c, "fw", "k2"); ks.Count != 0 {
		t.Fatalf("k2 %+v", ks)
	}
}

// TestStaleEntriesVisible: an entry older than the key's previous window is
// dropped as before, and the reply says so in Edgelimit-Stale-Entries.
func TestStaleEntriesVisible(t *testing.T) {
	_, clk, srv := newTestServer(t, nil)
	syncAs(t, srv, "", batch("a", 1, clk.now(), fwDelta("k", 1)))
	b := batch("a", 2, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: 990, Delta: 7}, fwDelta("k", 1))
	resp := postRaw(t, srv, b.AppendMsg(nil))
	if resp.StatusCode != 200 || resp.Header.Get("Edgelimit-Stale-Entries") != "1" {
		t.Fatalf("status %d, Edgelimit-Stale-Entries %q", resp.StatusCode, resp.Header.Get("Edgelimit-Stale-Entries"))
	}
}

// postRaw posts a sync body and returns the response (body closed).
func postRaw(t *testing.T, srv *httptest.Server, body []byte) *http.Response {
	t.Helper()
	resp, err := srv.Client().Post(srv.URL+"/v1/sync", MsgpackContentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestFutureAskAndDenialRefused: an amendment's ask or a final denial for
// a window past the coordinator's clock is refused as an entry would be
// (400 naming the field) and nothing of the batch is applied; an ask for
// a window 2^40 ahead used to be granted there, its view telling that
// window, and is now not counted (a window of another period:
// periodmismatch.go). (A denial naming no limiter of the configuration is
// not counted, and the rest of its batch is: TestUnknownLimiterNotCounted.)
func TestFutureAskAndDenialRefused(t *testing.T) {
	c, clk, srv := newTestServer(t, nil)
	now := clk.now()
	cur := now / sec
	b1 := batch("x", 1, now, wire.Delta{Limiter: "sfw", Key: "k", Window: cur, Delta: 1, Demand: 1})
	if st, _, p := syncAs(t, srv, "", b1); st != 200 {
		t.Fatalf("batch 1: %d %+v", st, p)
	}
	far := batch("y", 1, now)
	far.Asks = []wire.Ask{{Limiter: "sfw", Key: "k", Window: 1 << 40, Cost: 100}}
	if st, un, rp := syncUncounted(t, srv, "", far); st != 200 || un != "sfw" || named(rp, "sfw", "k") {
		t.Fatalf("ask for window 2^40: %d, uncounted %q, reply %+v; want 200, sfw uncounted and no view", st, un, rp)
	}
	ahead := cur + 3600 // an hour: past the skew, near enough to be a clock's
	ask := coordtest.Amend(b1, wire.Ask{Limiter: "sfw", Key: "k", Window: ahead, Cost: 100})
	if st, rp, p := syncAs(t, srv, "", ask); st != 400 || p.Field != "ak[0].window" || p.Type != "urn:edgelimit:problem:clock_skew" {
		t.Fatalf("ask for a window an hour ahead: %d %+v %+v, want 400 clock_skew naming ak[0].window", st, rp, p)
	}
	for _, tc := range []struct {
		d           wire.Denial
		field, kind string
	}{
		{wire.Denial{Limiter: "fw", Key: "k", Window: ahead, Cost: 1}, "dn[0].window", "clock_skew"},
	} {
		b := batch("x", 2, now, fwDelta("k", 1))
		b.Denials = []wire.Denial{tc.d}
		if st, _, p := syncAs(t, srv, "", b); st != 400 || p.Field != tc.field || p.Type != "urn:edgelimit:problem:"+tc.kind {
			t.Fatalf("denial %+v: %d %+v, want 400 %s naming %s", tc.d, st, p, tc.kind, tc.field)
		}
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 0 {
		t.Fatalf("fw/k count %d after the refused batches, want 0", ks.Count)
	}
	// The isolate's seq 2 still applies, its ask for the current window granted.
	b2 := batch("x", 2, now, fwDelta("k", 1))
	if st, _, p := syncAs(t, srv, "", b2); st != 200 {
		t.Fatalf("batch 2: %d %+v", st, p)
	}
	b3 := batch("x", 3, now, wire.Delta{Limiter: "sfw", Key: "k", Window: cur, Delta: 0, Demand: 0})
	if st, _, p := syncAs(t, srv, "", b3); st != 200 {
		t.Fatalf("batch 3: %d %+v", st, p)
	}
	st, rp, p := syncAs(t, srv, "", coordtest.Amend(b3, wire.Ask{Limiter: "sfw", Key: "k", Window: cur, Cost: 10}))
	if v := viewOf(t, rp, "sfw", "k"); st != 200 || v.Window != cur || v.Lease < 10 {
		t.Fatalf("ask for the current window: %d %+v %+v, want a lease of 10 there", st, v, p)
	}
}

// TestRetryOfAnAppliedBatchIsNoClockSkew: a batch applied, its reply lost,
// is retried to a coordinator whose clock is 5 s behind (another
// coordinator of the shared store, or this one after its clock was set
// back), past the allowed skew of the batch's time. A clock_skew refusal
// would tell the isolate that nothing of it was applied: it takes batches
// so refused back and cuts them again (wasm/core retime.go), which would
// count them twice. A number applied already is answered by the sequence
// rules instead: the retry is answered (Pebble) or refused 503 to retry
// later (shared mode, which does not read a refused batch's keys); never
// 400 clock_skew, and the key is counted once. A batch of a number not
// applied yet is still refused for its times.
func TestRetryOfAnAppliedBatchIsNoClockSkew(t *testing.T) {
	c, clk, srv := newTestServer(t, nil)
	b := batch("iso", 1, clk.now(), fwDelta("k", 3))
	if st, _, p := syncAs(t, srv, "", b); st != 200 {
		t.Fatalf("first attempt: %d %+v", st, p)
	}
	clk.add(-5 * sec)
	st, rp, p := syncAs(t, srv, "", b)
	switch {
	case st == 200:
		if v := viewOf(t, rp, "fw", "k"); v.Count != 3 {
			t.Errorf("the retry's view counts %d, want 3", v.Count)
		}
	case st == 503 && c.shared != nil:
	default:
		t.Fatalf("the retry of an applied batch 5 s ahead: %d %+v, want 200 (or 503 in shared mode)", st, p)
	}
	if st, _, p := syncAs(t, srv, "", batch("iso", 2, clk.now()+5*sec, fwDelta("k", 1))); st != 400 || p.Type != "urn:edgelimit:problem:clock_skew" {
		t.Fatalf("a new batch 5 s ahead: %d %+v, want 400 clock_skew", st, p)
	}
	clk.add(5 * sec)
	if ks := getKey(t, c, "fw", "k"); ks.Count != 3 {
		t.Fatalf("k counts %d, want 3", ks.Count)
	}
}
