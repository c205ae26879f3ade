package core_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// fakeCoord is a tiny coordinator for the tests: it applies each batch once
// per (isolate, seq) to a map of global counts and answers with a wire.Reply
// holding the global view of every key of the batch.
type fakeCoord struct {
	t         testing.TB
	cfg       wire.Config
	count     map[wkey]int64           // windowed algorithms: global cost per window
	tat       map[lkey]int64           // bucket algorithms: theoretical arrival time
	seen      map[lkey]map[string]bool // isolates that reported a key
	applied   map[string]int64         // isolate -> highest seq applied
	lease     func(iso string, k lkey, window int64) int64
	stand     int64 // strict: the standing lease every reply gives for the next window
	standFor  int64 // strict: with stand, the windows after the view's it stands in (View.StandTo - Window); 0: one
	life      int64 // strict: every reply's View.Life; 0: none
	spans     bool  // the last batch said it reads View.StandTo (Batch.Spans)
	exhausted bool  // strict: every reply says the window's budget is all counted or reserved
	batches   int
}

type lkey struct{ lim, key string }

type wkey struct {
	lkey
	win int64
}

func newFakeCoord(t testing.TB, cfg wire.Config) *fakeCoord {
	return &fakeCoord{t: t, cfg: cfg, count: map[wkey]int64{}, tat: map[lkey]int64{},
		seen: map[lkey]map[string]bool{}, applied: map[string]int64{}}
}

// handle applies a batch (unless its seq was applied already) and returns
// the encoded reply, with the coordinator's time now.
func (fc *fakeCoord) handle(batch []byte, now int64) []byte {
	fc.t.Helper()
	var b wire.Batch
	if err := b.UnmarshalMsg(batch); err != nil {
		fc.t.Fatalf("coordinator: bad batch: %v", err)
	}
	fc.spans = b.Spans
	fresh := b.Seq > fc.applied[b.Isolate]
	if fresh {
		if b.Seq != fc.applied[b.Isolate]+1 {
			fc.t.Fatalf("coordinator: isolate %s skipped from seq %d to %d", b.Isolate, fc.applied[b.Isolate], b.Seq)
		}
		fc.applied[b.Isolate] = b.Seq
		fc.batches++
	}
	rp := wire.Reply{Version: wire.Version, Seq: b.Seq, At: now}
	done := map[lkey]int{}
	for _, d := range b.Entries {
		k := lkey{d.Limiter, d.Key}
		l := limiterNamed(fc.cfg, d.Limiter)
		if l == nil {
			fc.t.Fatalf("coordinator: unknown limiter %q", d.Limiter)
		}
		if fresh {
			if fc.seen[k] == nil {
				fc.seen[k] = map[string]bool{}
			}
			fc.seen[k][b.Isolate] = true
			if l.IsBucket() {
				per := l.Period / limitFor(l, d.Key)
				fc.tat[k] = max(fc.tat[k], b.At) + d.Delta*per
			} else {
				fc.count[wkey{k, d.Window}] += d.Delta
			}
		}
		v := wire.View{Limiter: d.Limiter, Key: d.Key, Window: d.Window, Lease: -1,
			Isolates: int64(len(fc.seen[k])), Exhausted: fc.exhausted}
		if i, ok := done[k]; ok {
			if rp.Entries[i].Window >= d.Window {
				continue
			}
			rp.Entries = rp.Entries[:i+copy(rp.Entries[i:], rp.Entries[i+1:])]
		}
		if l.IsBucket() {
			v.Window = 0
			v.TAT = fc.tat[k]
		} else {
			v.Count = fc.count[wkey{k, d.Window}]
			v.Prev = fc.count[wkey{k, d.Window - 1}]
		}
		if fc.lease != nil && l.Mode == wire.Strict {
			v.Lease = fc.lease(b.Isolate, k, v.Window)
			v.Stand = fc.stand
			v.Life = fc.life
			if fc.standFor > 0 {
				v.StandTo = v.Window + fc.standFor
			}
		}
		done[k] = len(rp.Entries)
		rp.Entries = append(rp.Entries, v)
	}
	return rp.AppendMsg(nil)
}

// limiterNamed returns cfg's limiter named name, or nil. (wire.Config's
// Limiter and LimitFor are host helpers, not built for wasip1, where this
// package is vetted too.)
func limiterNamed(cfg wire.Config, name string) *wire.LimiterConfig {
	for i := range cfg.Limiters {
		if cfg.Limiters[i].Name == name {
			return &cfg.Limiters[i]
		}
	}
	return nil
}

// limitFor returns l's limit for key, overrides applied.
func limitFor(l *wire.LimiterConfig, key string) int64 {
	for _, o := range l.Overrides {
		if o.Key == key {
			return o.Limit
		}
	}
	return l.Limit
}

// sync runs one SyncOut/SyncIn round of c through fc at time now. It
// reports whether a batch was sent.
func (fc *fakeCoord) sync(c *core.Core, now int64) bool {
	fc.t.Helper()
	out, err := c.SyncOut(now, nil)
	if err != nil {
		fc.t.Fatalf("SyncOut: %v", err)
	}
	if len(out) == 0 {
		return false
	}
	if err := c.SyncIn(fc.handle(out, now), now); err != nil {
		fc.t.Fatalf("SyncIn: %v", err)
	}
	return true
}

func peekRemaining(t testing.TB, c *core.Core, lim int, key string, now int64) int64 {
	t.Helper()
	var r core.Result
	if err := c.Decide(lim, []byte(key), 0, now, &r); err != nil {
		t.Fatal(err)
	}
	return r.Remaining
}

func approxCfg(iso, alg string, limit, period int64) wire.Config {
	return wire.Config{Version: wire.Version, IsolateID: iso, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: alg, Limit: limit, Period: period, Mode: wire.Approximate},
	}}
}

// Several isolates sharing one key in approximate mode: every admitted cost
// reaches the coordinator exactly once, each isolate's view after a sync is
// the global count, and once the global count reaches the limit every
// isolate denies.
func TestApproximateConvergence(t *testing.T) {
	for _, alg := range []string{wire.FixedWindow, wire.SlidingWindow} {
		t.Run(alg, func(t *testing.T) {
			const limit = 1000
			period := 3600 * sec // one window for the whole test
			fc := newFakeCoord(t, approxCfg("x", alg, limit, period))
			var cores []*core.Core
			for _, iso := range []string{"iso-a", "iso-b", "iso-c"} {
				cores = append(cores, mustCore(t, approxCfg(iso, alg, limit, period)))
			}
			rng := rand.New(rand.NewSource(7))
			now := 10 * sec
			admitted := int64(0)
			for round := 0; round < 200; round++ {
				for _, c := range cores {
					for n := rng.Intn(12); n > 0; n-- {
						now += ms
						var r core.Result
						if err := c.Decide(0, []byte("shared"), 1, now, &r); err != nil {
							t.Fatal(err)
						}
						if r.Allowed {
							admitted++
						}
					}
				}
				for _, c := range cores {
					now += ms
					if !fc.sync(c, now) {
						continue
					}
					global := fc.count[wkey{lkey{"api", "shared"}, now / period}]
					// Right after its sync an isolate has nothing
					// unacknowledged: it sees the global count, less
					// its estimate of what the others admitted and
					// have not synced yet (at most 2 isolates x 11
					// requests here).
					want := max(limit-global, 0)
					if got := peekRemaining(t, c, 0, "shared", now); got > want || got < want-22 {
						t.Fatalf("round %d: remaining right after sync = %d, want %d minus at most 22 (global %d)", round, got, want, global)
					}
				}
			}
			global := fc.count[wkey{lkey{"api", "shared"}, now / period}]
			if global != admitted {
				t.Errorf("coordinator counted %d, isolates admitted %d: not exactly once", global, admitted)
			}
			if global < limit {
				t.Fatalf("the traffic did not reach the limit (%d of %d)", global, limit)
			}
			// Overrun is bounded by what the other isolates admit between
			// two syncs (at most 2 isolates * 11 requests here).
			if global > limit+22 {
				t.Errorf("global count %d overruns the limit %d by more than one sync round", global, limit)
			}
			for i, c := range cores {
				var r core.Result
				if err := c.Decide(0, []byte("shared"), 1, now, &r); err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					t.Errorf("isolate %d admits after the global limit was reached", i)
				}
				if st := c.Stats(); st.Replies != st.Batches || st.Errors != 0 {
					t.Errorf("isolate %d stats %+v: every batch should have one reply, no errors", i, st)
				}
			}
			if int64(fc.batches) != cores[0].Stats().Batches+cores[1].Stats().Batches+cores[2].Stats().Batches {
				t.Errorf("coordinator applied %d batches, isolates cut %d+%d+%d", fc.batches,
					cores[0].Stats().Batches, cores[1].Stats().Batches, cores[2].Stats().Batches)
			}
		})
	}
}

// A token bucket shared by two isolates: what one consumed reaches the
// other through the coordinator's TAT.
func TestApproximateBucketSharesTAT(t *testing.T) {
	cfgA := approxCfg("a", wire.TokenBucket, 10, 10*sec)
	fc := newFakeCoord(t, cfgA)
	a, b := mustCore(t, cfgA), mustCore(t, approxCfg("b", wire.TokenBucket, 10, 10*sec))
	now := 100 * sec
	var r core.Result
	for i := 0; i < 10; i++ {
		if err := a.Decide(0, []byte("k"), 1, now, &r); err != nil || !r.Allowed {
			t.Fatalf("a %d: %v %+v", i, err, r)
		}
	}
	fc.sync(a, now)
	// b has demand (a denied-or-admitted request) and syncs to learn the view.
	if err := b.Decide(0, []byte("k"), 1, now, &r); err != nil || !r.Allowed {
		t.Fatalf("b: %v %+v", err, r)
	}
	fc.sync(b, now)
	if err := b.Decide(0, []byte("k"), 1, now, &r); err != nil {
		t.Fatal(err)
	}
	if r.Allowed || r.RetryAfter != 2*sec {
		t.Errorf("b after learning the global TAT (11 units used, 1 per second): %+v, want denied, retry 2s", r)
	}
	if got := peekRemaining(t, b, 0, "k", now+5*sec); got != 4 {
		t.Errorf("b remaining 5 s later = %d, want 4", got)
	}
}

func TestSyncOutRetryReturnsSameBatch(t *testing.T) {
	cfg := approxCfg("iso-1", wire.FixedWindow, 100, 60*sec)
	c := mustCore(t, cfg)
	fc := newFakeCoord(t, cfg)
	var r core.Result
	now := 5 * sec
	if out, err := c.SyncOut(now, nil); err != nil || len(out) != 0 || c.Outstanding() {
		t.Fatalf("SyncOut with nothing to sync = %x, %v (outstanding %v)", out, err, c.Outstanding())
	}
	for _, k := range []string{"a", "b", "a"} {
		if err := c.Decide(0, []byte(k), 2, now, &r); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.SyncOut(now, nil)
	if err != nil || len(first) == 0 || !c.Outstanding() {
		t.Fatalf("SyncOut = %x, %v", first, err)
	}
	var b1 wire.Batch
	if err := b1.UnmarshalMsg(first); err != nil {
		t.Fatal(err)
	}
	if b1.Seq != 1 || b1.Isolate != "iso-1" || b1.At != now || len(b1.Entries) != 2 {
		t.Fatalf("first batch = %+v", b1)
	}
	// More traffic while the batch is out; a retry returns the same bytes,
	// appended to dst.
	if err := c.Decide(0, []byte("c"), 5, now+sec, &r); err != nil {
		t.Fatal(err)
	}
	again, err := c.SyncOut(now+2*sec, []byte("prefix"))
	if err != nil || !bytes.Equal(again, append([]byte("prefix"), first...)) {
		t.Fatalf("retry = %x, %v; want prefix + %x", again, err, first)
	}
	if st := c.Stats(); st.Batches != 1 {
		t.Errorf("Batches = %d after a retry, want 1", st.Batches)
	}
	// The coordinator applies it; the reply is lost and the batch retried:
	// still applied once.
	fc.handle(first, now)
	if err := c.SyncIn(fc.handle(again[len("prefix"):], now), now+2*sec); err != nil {
		t.Fatal(err)
	}
	if c.Outstanding() {
		t.Fatal("still outstanding after the reply")
	}
	// The next batch has the next seq and only the traffic made meanwhile.
	next, err := c.SyncOut(now+3*sec, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b2 wire.Batch
	if err := b2.UnmarshalMsg(next); err != nil {
		t.Fatal(err)
	}
	if b2.Seq != 2 || len(b2.Entries) != 1 || b2.Entries[0].Key != "c" || b2.Entries[0].Delta != 5 {
		t.Fatalf("second batch = %+v, want seq 2 with c:5", b2)
	}
	if err := c.SyncIn(fc.handle(next, now+3*sec), now+3*sec); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]int64{"a": 4, "b": 2, "c": 5} {
		if got := fc.count[wkey{lkey{"api", k}, 0}]; got != want {
			t.Errorf("global %s = %d, want %d", k, got, want)
		}
		if got := peekRemaining(t, c, 0, k, now+3*sec); got != 100-want {
			t.Errorf("local remaining of %s = %d, want %d", k, got, 100-want)
		}
	}
}

// snapshot captures what a refused reply must not change.
type snapshot struct {
	out   []byte
	rem   []int64
	stats wire.Stats
}

func snap(t *testing.T, c *core.Core, keys []string, now int64) snapshot {
	t.Helper()
	s := snapshot{stats: c.Stats()}
	for _, k := range keys {
		s.rem = append(s.rem, peekRemaining(t, c, 0, k, now))
	}
	out, err := c.SyncOut(now, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.out = out
	return s
}

func sameSnap(t *testing.T, what string, a, b snapshot) {
	t.Helper()
	if !bytes.Equal(a.out, b.out) {
		t.Errorf("%s: the outstanding batch changed", what)
	}
	for i := range a.rem {
		if a.rem[i] != b.rem[i] {
			t.Errorf("%s: remaining of key %d changed from %d to %d", what, i, a.rem[i], b.rem[i])
		}
	}
	// Peeks and SyncOut add decisions; everything else must be equal.
	a.stats.Decisions, b.stats.Decisions = 0, 0
	a.stats.Errors, b.stats.Errors = 0, 0
	if a.stats != b.stats {
		t.Errorf("%s: stats changed from %+v to %+v", what, a.stats, b.stats)
	}
}

func TestSyncInRefusesBadReplies(t *testing.T) {
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso-1", Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 100, Period: 60 * sec},
		{Name: "bkt", Algorithm: wire.TokenBucket, Limit: 100, Period: 60 * sec},
	}}
	c := mustCore(t, cfg)
	now := 5 * sec
	var r core.Result
	// A reply when no batch is outstanding is stale.
	good := wire.Reply{Version: wire.Version, Seq: 1, At: now, Entries: []wire.View{
		{Limiter: "api", Key: "a", Window: 0, Count: 50, Lease: -1, Isolates: 2},
	}}
	if err := c.SyncIn(good.AppendMsg(nil), now); !errors.Is(err, core.ErrStaleReply) {
		t.Fatalf("SyncIn with nothing outstanding = %v, want ErrStaleReply", err)
	}
	for _, k := range []string{"a", "b"} {
		if err := c.Decide(0, []byte(k), 10, now, &r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.SyncOut(now, nil); err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b"}
	before := snap(t, c, keys, now)

	reply := func(mod func(*wire.Reply)) []byte {
		rp := good
		rp.Entries = append([]wire.View(nil), good.Entries...)
		mod(&rp)
		return rp.AppendMsg(nil)
	}
	goodBytes := reply(func(*wire.Reply) {})
	cases := []struct {
		name  string
		reply []byte
		want  error
	}{
		{"wrong seq", reply(func(rp *wire.Reply) { rp.Seq = 2 }), core.ErrStaleReply},
		{"old seq", reply(func(rp *wire.Reply) { rp.Seq = 0 }), core.ErrStaleReply},
		{"unknown limiter", reply(func(rp *wire.Reply) {
			// a valid entry first: the reply is refused whole
			rp.Entries = append(rp.Entries, wire.View{Limiter: "nope", Key: "b", Count: 7, Lease: -1, Isolates: 1})
		}), core.ErrUnknownLimiter},
		{"bad version", reply(func(rp *wire.Reply) { rp.Version = 2 }), core.ErrBadInput},
		{"empty key", reply(func(rp *wire.Reply) {
			rp.Entries = append(rp.Entries, wire.View{Limiter: "api", Key: "", Lease: -1, Isolates: 1})
		}), core.ErrBadInput},
		{"long key", reply(func(rp *wire.Reply) {
			rp.Entries = append(rp.Entries, wire.View{Limiter: "api", Key: strings.Repeat("k", 257), Lease: -1, Isolates: 1})
		}), core.ErrBadInput},
		{"empty", nil, core.ErrBadInput},
		{"not a map", []byte{0x93, 1, 2, 3}, core.ErrBadInput},
		{"truncated", goodBytes[:len(goodBytes)-3], core.ErrBadInput},
		{"trailing", append(append([]byte(nil), goodBytes...), 0xc0), core.ErrBadInput},
		{"short entry", append(append([]byte(nil), goodBytes[:len(goodBytes)-21]...), 0x92, 0xa1, 'x', 0xa1, 'y'), core.ErrBadInput},
	}
	for _, tc := range cases {
		errsBefore := c.Stats().Errors
		err := c.SyncIn(tc.reply, now)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: SyncIn = %v, want %v", tc.name, err, tc.want)
		}
		if got := c.Stats().Errors - errsBefore; got != 1 {
			t.Errorf("%s: Errors grew by %d, want 1", tc.name, got)
		}
		if !c.Outstanding() {
			t.Fatalf("%s: the batch is no longer outstanding", tc.name)
		}
		sameSnap(t, tc.name, before, snap(t, c, keys, now))
	}
	// The good reply still applies afterwards.
	if err := c.SyncIn(goodBytes, now); err != nil {
		t.Fatalf("good reply: %v", err)
	}
	if c.Outstanding() {
		t.Fatal("outstanding after the good reply")
	}
	if got := peekRemaining(t, c, 0, "a", now); got != 50 {
		t.Errorf("a after the reply: remaining %d, want 100-50", got)
	}
	// b was acknowledged but is absent from the reply: its cost left the
	// unsynced counters and no view replaced it.
	if st := c.Stats(); st.Replies != 1 {
		t.Errorf("Replies = %d, want 1", st.Replies)
	}
	// A second reply to the batch (another attempt's, an amendment's) is
	// taken until the next batch is cut: its views only, the deltas
	// acknowledged once.
	if err := c.SyncIn(goodBytes, now); err != nil {
		t.Errorf("same reply twice = %v, want it taken", err)
	}
	if got := peekRemaining(t, c, 0, "a", now); got != 50 {
		t.Errorf("a after the reply twice: remaining %d, want 100-50 (acknowledged once)", got)
	}
	// Once the next batch is cut, a reply to the old one (not amended)
	// is stale.
	_ = c.Decide(0, []byte("a"), 1, now, &core.Result{})
	if out, err := c.SyncOut(now, nil); err != nil || len(out) == 0 {
		t.Fatalf("next batch: %d bytes, %v", len(out), err)
	}
	if err := c.SyncIn(goodBytes, now); !errors.Is(err, core.ErrStaleReply) {
		t.Errorf("a reply to the previous batch = %v, want ErrStaleReply", err)
	}
}

// A reply for a key this isolate no longer tracks (reset since the batch)
// is skipped, not an error.
func TestSyncInSkipsKeysNoLongerTracked(t *testing.T) {
	cfg := approxCfg("iso-1", wire.FixedWindow, 10, 60*sec)
	c := mustCore(t, cfg)
	fc := newFakeCoord(t, cfg)
	var r core.Result
	_ = c.Decide(0, []byte("gone"), 3, sec, &r)
	_ = c.Decide(0, []byte("kept"), 3, sec, &r)
	out, err := c.SyncOut(sec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Reset(0, []byte("gone")); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncIn(fc.handle(out, sec), sec); err != nil {
		t.Fatalf("SyncIn: %v", err)
	}
	if got := c.Stats().Keys; got != 1 {
		t.Errorf("keys = %d, want 1 (the reply must not recreate a reset key)", got)
	}
	if got := peekRemaining(t, c, 0, "kept", sec); got != 7 {
		t.Errorf("kept remaining = %d, want 7", got)
	}
}

func TestSyncOutNeedsIsolateID(t *testing.T) {
	cfg := approxCfg("", wire.FixedWindow, 10, 60*sec)
	c := mustCore(t, cfg)
	var r core.Result
	if err := c.Decide(0, []byte("k"), 1, sec, &r); err != nil {
		t.Fatal(err)
	}
	if out, err := c.SyncOut(sec, []byte("x")); !errors.Is(err, core.ErrNoIsolateID) || string(out) != "x" {
		t.Errorf("SyncOut without an isolate id = %q, %v; want dst unchanged and ErrNoIsolateID", out, err)
	}
	if c.Outstanding() {
		t.Error("outstanding after a refused SyncOut")
	}
}

func strictCfg(alg string, limit, period int64) wire.Config {
	return wire.Config{Version: wire.Version, IsolateID: "iso-s", Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: alg, Limit: limit, Period: period, Mode: wire.Strict},
	}}
}

func TestStrictLease(t *testing.T) {
	for _, alg := range []string{wire.FixedWindow, wire.SlidingWindow, wire.TokenBucket, wire.GCRA} {
		t.Run(alg, func(t *testing.T) {
			P := 60 * sec
			cfg := strictCfg(alg, 100, P)
			c := mustCore(t, cfg)
			fc := newFakeCoord(t, cfg)
			grant := int64(3)
			fc.lease = func(string, lkey, int64) int64 { return grant }
			now := 10 * sec
			var r core.Result
			dec := func(cost int64) core.Result {
				t.Helper()
				if err := c.Decide(0, []byte("k"), cost, now, &r); err != nil {
					t.Fatal(err)
				}
				return r
			}
			// No lease yet: nothing is admitted, a sync is wanted, and the
			// retry is short (a sync away), not the end of the window.
			if r := dec(1); r.Allowed || !r.SyncWanted || r.RetryAfter <= 0 || r.RetryAfter > P/100 {
				t.Fatalf("before any lease: %+v, want denied, sync wanted, retry in (0, %d]", r, P/100)
			}
			// A peek reports the global estimate, not the (absent) lease.
			if r := dec(0); !r.Allowed || r.Remaining != 100 {
				t.Errorf("peek before any lease: %+v, want allowed with the whole limit, 100, remaining", r)
			}
			// The denied request's demand goes out; the coordinator grants 3.
			if !fc.sync(c, now) {
				t.Fatal("no batch with the demand of a denied request")
			}
			for i := int64(0); i < grant; i++ {
				if r := dec(1); !r.Allowed || r.Remaining != 100-i-1 {
					t.Fatalf("within the lease, unit %d: %+v, want remaining %d (the global estimate)", i, r, 100-i-1)
				}
			}
			if r := dec(1); r.Allowed || !r.SyncWanted {
				t.Fatalf("lease used up: %+v, want denied with sync wanted", r)
			}
			// Admitted while the next batch is out: the new lease is what the
			// coordinator granted beyond the acknowledged batch, minus what
			// was admitted since the batch was cut.
			out, err := c.SyncOut(now, nil)
			if err != nil || len(out) == 0 {
				t.Fatalf("SyncOut: %x %v", out, err)
			}
			grant = 5
			replyBytes := fc.handle(out, now)
			if err := c.SyncIn(replyBytes, now); err != nil {
				t.Fatal(err)
			}
			if r := dec(2); !r.Allowed || r.Remaining != 100-3-2 {
				t.Fatalf("after a lease of 5: %+v, want allowed with 95 left (the 3 admitted before, acknowledged, and these 2)", r)
			}
			// A fixed window reports cost within its lease lazily (it is
			// reserved at the coordinator already): no batch while 3 of 5
			// are left, one once the lease is more than half spent.
			lazy := alg == wire.FixedWindow
			out, _ = c.SyncOut(now, nil) // holds the 2, or (lazy) nothing
			if lazy {
				if len(out) != 0 {
					t.Fatalf("cost within the lease reported at once: %x", out)
				}
				if r := dec(1); !r.Allowed || !r.SyncWanted {
					t.Fatalf("lease 3 of 5 left: %+v, want allowed, sync wanted", r)
				}
				if out, _ = c.SyncOut(now, nil); len(out) == 0 {
					t.Fatal("lease 2 of 5 left: no batch")
				}
			}
			if r := dec(1); !r.Allowed {
				t.Fatalf("pending unit: %+v", r)
			}
			grant = 4
			if err := c.SyncIn(fc.handle(out, now), now); err != nil {
				t.Fatal(err)
			}
			// lease 4 - 1 admitted since the cut = 3
			if r := dec(3); !r.Allowed {
				t.Errorf("lease 4 minus 1 pending: %+v, want 3 admitted", r)
			}
			if r := dec(1); r.Allowed || !r.SyncRetry {
				t.Errorf("beyond the lease: %+v, want denied with a sync retry", r)
			}
			total := fc.count[wkey{lkey{"api", "k"}, now / P}]
			if alg == wire.TokenBucket || alg == wire.GCRA {
				total = (fc.tat[lkey{"api", "k"}] - now) / (P / 100)
			}
			want := int64(5) // 3 + 2
			if lazy {
				want = 6 // 3 + 3
			}
			if total != want {
				t.Errorf("coordinator saw %d admitted, want %d", total, want)
			}
		})
	}
}

// A strict lease is for one window: it is not used in the next.
func TestStrictLeaseIsPerWindow(t *testing.T) {
	P := 10 * sec
	cfg := strictCfg(wire.FixedWindow, 100, P)
	c := mustCore(t, cfg)
	fc := newFakeCoord(t, cfg)
	fc.lease = func(string, lkey, int64) int64 { return 10 }
	var r core.Result
	_ = c.Decide(0, []byte("k"), 1, sec, &r)
	fc.sync(c, sec)
	if err := c.Decide(0, []byte("k"), 1, 2*sec, &r); err != nil || !r.Allowed {
		t.Fatalf("within the lease: %v %+v", err, r)
	}
	if err := c.Decide(0, []byte("k"), 1, P+sec, &r); err != nil || r.Allowed {
		t.Errorf("next window with the old window's lease: %v %+v, want denied", err, r)
	}
}

// Remaining is the global estimate (limit less the view and the unsynced
// local cost), never the isolate's lease: a cost beyond the lease is
// denied with SyncRetry while the window has room.
func TestStrictRemainingWhenDenied(t *testing.T) {
	cfg := strictCfg(wire.FixedWindow, 100, 60*sec)
	c := mustCore(t, cfg)
	fc := newFakeCoord(t, cfg)
	fc.lease = func(string, lkey, int64) int64 { return 2 }
	var r core.Result
	_ = c.Decide(0, []byte("k"), 1, sec, &r)
	fc.sync(c, sec)
	if err := c.Decide(0, []byte("k"), 3, sec, &r); err != nil {
		t.Fatal(err)
	}
	if r.Allowed || !r.SyncRetry || r.Remaining != 100 {
		t.Errorf("cost 3 with a lease of 2: %+v, want denied with a sync retry and remaining 100", r)
	}
	if err := c.Decide(0, []byte("k"), 2, sec, &r); err != nil || !r.Allowed || r.Remaining != 98 {
		t.Errorf("cost 2 with a lease of 2: %v %+v, want allowed with remaining 98", err, r)
	}
}

func TestDecideBadInput(t *testing.T) {
	c := mustCore(t, approxCfg("iso", wire.FixedWindow, 10, 60*sec))
	var r core.Result
	k := []byte("k")
	cases := []struct {
		name string
		lim  int
		key  []byte
		cost int64
		now  int64
		want error
		code int32
	}{
		{"unknown limiter", 1, k, 1, 0, core.ErrUnknownLimiter, -2},
		{"negative limiter", -1, k, 1, 0, core.ErrUnknownLimiter, -2},
		{"empty key", 0, nil, 1, 0, core.ErrEmptyKey, -4},
		{"key of 257 bytes", 0, bytes.Repeat([]byte("k"), 257), 1, 0, core.ErrKeyTooLong, -3},
		{"negative cost", 0, k, -1, 0, core.ErrBadCost, -5},
		{"cost above 2^40", 0, k, wire.MaxCost + 1, 0, core.ErrBadCost, -5},
		{"negative time", 0, k, 1, -1, core.ErrBadTime, -6},
	}
	for i, tc := range cases {
		err := c.Decide(tc.lim, tc.key, tc.cost, tc.now, &r)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if core.Code(err) != tc.code || core.ErrorForCode(tc.code) != tc.want {
			t.Errorf("%s: code %d, want %d", tc.name, core.Code(err), tc.code)
		}
		if st := c.Stats(); st.Errors != int64(i+1) || st.Decisions != 0 || st.Keys != 0 {
			t.Errorf("%s: stats %+v, want %d errors and no decision or key", tc.name, st, i+1)
		}
	}
	// The edges that are fine.
	if err := c.Decide(0, bytes.Repeat([]byte("k"), 256), 0, 0, &r); err != nil {
		t.Errorf("key of 256 bytes: %v", err)
	}
	if err := c.Decide(0, k, wire.MaxCost, 0, &r); err != nil || r.Allowed || r.RetryAfter != -1 {
		t.Errorf("cost 2^40 over a limit of 10: %v %+v, want denied forever", err, r)
	}
	if core.Code(nil) != 0 || core.ErrorForCode(0) != nil || core.ErrorForCode(-99) != core.ErrBadInput ||
		core.Code(errors.New("other")) != core.Code(core.ErrBadInput) {
		t.Error("Code/ErrorForCode edge cases")
	}
	// Wrapped errors keep their codes: by %w, by errors.Join (first or
	// later member), nested.
	for _, tc := range []struct {
		err  error
		code int32
	}{
		{fmt.Errorf("x: %w", core.ErrKeyTooLong), -3},
		{errors.Join(errors.New("other"), core.ErrStaleReply), -8},
		{fmt.Errorf("y: %w", errors.Join(core.ErrUnknownLimiter, errors.New("z"))), -2},
		{errors.Join(errors.New("a"), errors.New("b")), -10},
		{fmt.Errorf("w: %w", errors.New("other")), -10},
	} {
		if got := core.Code(tc.err); got != tc.code {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.code)
		}
	}
	if _, err := core.New(wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "x", Algorithm: wire.FixedWindow, Limit: 0, Period: sec}}}); err == nil {
		t.Error("core.New accepted limit 0")
	}
}

// Once an approximate windowed limiter denies, the isolate has nothing to
// tell the coordinator (a denial changes no count): no batch until it
// admits again. A bucket still syncs its denials (it refills, and a fresh
// view tells when), and so does strict mode (its leases follow demand).
func TestApproximateWindowDenialsDoNotSync(t *testing.T) {
	const sec = int64(1e9)
	for _, tc := range []struct {
		cfg      wire.Config
		wantSync bool
	}{
		{approxCfg("iso-a", wire.FixedWindow, 2, sec), false},
		{approxCfg("iso-a", wire.SlidingWindow, 2, sec), false},
		{approxCfg("iso-a", wire.TokenBucket, 2, sec), true},
		{strictCfg(wire.FixedWindow, 2, sec), true},
	} {
		alg, mode := tc.cfg.Limiters[0].Algorithm, tc.cfg.Limiters[0].Mode
		c, err := core.New(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		fc := newFakeCoord(t, tc.cfg)
		now := 100 * sec
		var r core.Result
		for i := 0; i < 4; i++ { // fill the limit (strict: syncing for leases)
			if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil {
				t.Fatal(err)
			}
			fc.sync(c, now)
		}
		for i := 0; i < 3; i++ {
			if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil || r.Allowed {
				t.Fatalf("%s/%s: decision %+v, %v; want a denial", alg, mode, r, err)
			}
		}
		b, err := c.SyncOut(now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(b) > 0; got != tc.wantSync {
			t.Errorf("%s/%s: batch after denials only: %v, want %v", alg, mode, got, tc.wantSync)
		}
	}
}

// An isolate that asked for budget and got none denies locally (no wait
// for a sync that can only refuse, no batch) for a sync gap, then asks again.
func TestStrictDryDeniesLocally(t *testing.T) {
	P := 10 * sec
	cfg := strictCfg(wire.FixedWindow, 100, P)
	c := mustCore(t, cfg)
	fc := newFakeCoord(t, cfg)
	fc.lease = func(string, lkey, int64) int64 { return 0 }
	now := sec
	var r core.Result
	if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil || r.Allowed || !r.SyncRetry {
		t.Fatalf("no lease: %+v %v, want a sync retry", r, err)
	}
	if !fc.sync(c, now) {
		t.Fatal("no batch with the refused demand")
	}
	now += 1e6
	if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil || r.Allowed || r.SyncRetry || r.SyncWanted {
		t.Fatalf("after a refusal: %+v %v, want denied here, no retry, no sync", r, err)
	}
	// The retry is the dry spell's end (then it asks again), not the
	// window's end: budget others leave unused comes back.
	if r.RetryAfter <= 0 || r.RetryAfter >= P-now%P {
		t.Errorf("retry after %d, want within the dry spell, before the window's end %d", r.RetryAfter, P-now%P)
	}
	if out, _ := c.SyncOut(now, nil); len(out) != 0 {
		t.Errorf("a local denial made a batch: %x", out)
	}
	// Past the dry spell (one sync gap or round trip), it asks again.
	now += sec
	if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil || !r.SyncRetry {
		t.Fatalf("after the dry spell: %+v %v, want a sync retry", r, err)
	}
	// The next window is not dry.
	fc.lease = func(string, lkey, int64) int64 { return 5 }
	fc.sync(c, now)
	if err := c.Decide(0, []byte("k"), 1, P+sec, &r); err != nil || r.Allowed || !r.SyncRetry {
		t.Fatalf("next window without a lease for it: %+v %v, want a sync retry", r, err)
	}
}

// A standing lease lets a strict isolate start the next window without
// asking: it admits up to the standing lease there, then asks. A reply made
// before that window that arrives after the isolate began it on the
// standing lease does not give it a second one.
func TestStrictStandingLease(t *testing.T) {
	P := 10 * sec
	cfg := strictCfg(wire.FixedWindow, 100, P)
	c := mustCore(t, cfg)
	fc := newFakeCoord(t, cfg)
	fc.lease = func(string, lkey, int64) int64 { return 2 }
	fc.stand = 3
	var r core.Result
	dec := decideOne(t, c)
	dec(sec) // no lease yet: asks
	if !fc.sync(c, sec) {
		t.Fatal("no batch")
	}
	// Window 1: three admitted without any sync, the fourth asks.
	for i := 0; i < 3; i++ {
		if r := dec(P + sec + int64(i)); !r.Allowed {
			t.Fatalf("unit %d of the standing lease: %+v", i, r)
		}
	}
	if r := dec(P + 2*sec); r.Allowed || !r.SyncRetry {
		t.Fatalf("past the standing lease: %+v, want a sync retry", r)
	}
	// Window 3 is not covered (the standing lease is for window 1 only).
	if r := dec(3*P + sec); r.Allowed || !r.SyncRetry {
		t.Fatalf("two windows on: %+v, want a sync retry", r)
	}
	// A reply cut in window 3 arrives in window 4 after the isolate began
	// window 4 on the standing lease it was told in window 3 (fc.stand 3
	// from the reply before): it keeps that lease, not a second one.
	c2 := mustCore(t, cfg)
	fc2 := newFakeCoord(t, cfg)
	fc2.lease = func(string, lkey, int64) int64 { return 1 }
	fc2.stand = 3
	if err := c2.Decide(0, []byte("k"), 1, 3*P+sec, &r); err != nil {
		t.Fatal(err)
	}
	fc2.sync(c2, 3*P+sec) // lease 1 for window 3, standing 3 for window 4
	if err := c2.Decide(0, []byte("k"), 1, 3*P+2*sec, &r); err != nil || !r.Allowed {
		t.Fatalf("within the lease: %+v %v", r, err)
	}
	if err := c2.Decide(0, []byte("k"), 1, 3*P+3*sec, &r); err != nil || r.Allowed {
		t.Fatalf("lease spent: %+v %v", r, err)
	}
	out, err := c2.SyncOut(3*P+3*sec, nil) // asks in window 3; the reply is late
	if err != nil || len(out) == 0 {
		t.Fatalf("no batch: %v", err)
	}
	late := fc2.handle(out, 3*P+3*sec)
	admitted := 0
	for i := 0; i < 5; i++ {
		if err := c2.Decide(0, []byte("k"), 1, 4*P+int64(i), &r); err == nil && r.Allowed {
			admitted++
		}
	}
	if err := c2.SyncIn(late, 4*P+sec); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := c2.Decide(0, []byte("k"), 1, 4*P+2*sec+int64(i), &r); err == nil && r.Allowed {
			admitted++
		}
	}
	if admitted != 3 {
		t.Fatalf("window 4 admitted %d, want the standing lease's 3 (the late reply must not add one)", admitted)
	}
}

// A reply that says nothing is free in the window makes the isolate deny
// locally once its lease is spent, without asking, for a dry spell; then
// it asks again.
func TestStrictNothingFreeDeniesLocally(t *testing.T) {
	P := 10 * sec
	cfg := strictCfg(wire.FixedWindow, 100, P)
	c := mustCore(t, cfg)
	fc := newFakeCoord(t, cfg)
	fc.lease = func(string, lkey, int64) int64 { return 2 }
	fc.exhausted = true
	var r core.Result
	_ = c.Decide(0, []byte("k"), 1, sec, &r)
	fc.sync(c, sec)
	for i := 0; i < 2; i++ {
		if err := c.Decide(0, []byte("k"), 1, sec+int64(i+1), &r); err != nil || !r.Allowed {
			t.Fatalf("within the lease: %+v %v", r, err)
		}
	}
	if err := c.Decide(0, []byte("k"), 1, sec+5e6, &r); err != nil || r.Allowed || r.SyncRetry || r.SyncWanted {
		t.Fatalf("lease spent, nothing free: %+v %v, want a local denial", r, err)
	}
	if out, _ := c.SyncOut(sec+5e6, nil); len(out) != 0 {
		t.Errorf("a local denial made a batch: %x", out)
	}
	if err := c.Decide(0, []byte("k"), 1, 9*sec, &r); err != nil || !r.SyncRetry {
		t.Fatalf("after the dry spell: %+v %v, want a sync retry", r, err)
	}
	// The next window asks again.
	if err := c.Decide(0, []byte("k"), 1, P+sec, &r); err != nil || !r.SyncRetry {
		t.Fatalf("next window: %+v %v, want a sync retry", r, err)
	}
}

// A standing lease over several windows (View.StandTo: a sparse isolate's
// unit, coordinator/merge spanWindows) admits up to Stand in each window
// after the view's through StandTo without asking, and a request past it
// asks; so does one past the lease's life. The module says it reads
// StandTo (Batch.Spans); a view whose StandTo is not after its window, or
// more than wire.MaxStandWindows after it, is refused.
func TestStandingLeaseOverSeveralWindows(t *testing.T) {
	P := sec
	cfg := strictCfg(wire.FixedWindow, 100, P)
	c := mustCore(t, cfg)
	fc := newFakeCoord(t, cfg)
	fc.lease = func(string, lkey, int64) int64 { return 0 }
	fc.stand, fc.standFor, fc.life = 1, 4, 10*sec
	var r core.Result
	dec := decideOne(t, c)
	dec(P / 2) // no lease yet: asks
	if !fc.sync(c, P/2) || !fc.spans {
		t.Fatalf("no batch, or one that does not say it reads StandTo (spans %v)", fc.spans)
	}
	// Windows 1 to 4: one request each decided at once, a second in the
	// same window asks. The isolate syncs nothing meanwhile.
	before := fc.batches
	for w := int64(1); w <= 4; w++ {
		if r := dec(w*P + P/3); !r.Allowed {
			t.Fatalf("window %d, first request: %+v, want admitted on the standing unit", w, r)
		}
		if r := dec(w*P + P/2); r.Allowed || !r.SyncRetry {
			t.Fatalf("window %d, second request: %+v, want a sync retry", w, r)
		}
	}
	if fc.batches != before {
		t.Fatalf("%d batches sent while standing, want none", fc.batches-before)
	}
	if r := dec(5*P + P/3); r.Allowed || !r.SyncRetry {
		t.Fatalf("window 5, past StandTo: %+v, want a sync retry", r)
	}

	// Past its life (2.5 windows from the cut) the unit is void.
	c2 := mustCore(t, cfg)
	fc2 := newFakeCoord(t, cfg)
	fc2.lease = func(string, lkey, int64) int64 { return 0 }
	fc2.stand, fc2.standFor, fc2.life = 1, 4, 5*P/2
	if err := c2.Decide(0, []byte("k"), 1, P/2, &r); err != nil {
		t.Fatal(err)
	}
	fc2.sync(c2, P/2)
	if err := c2.Decide(0, []byte("k"), 1, 2*P+P/3, &r); err != nil || !r.Allowed {
		t.Fatalf("window 2, within the life: %+v %v", r, err)
	}
	if err := c2.Decide(0, []byte("k"), 1, 3*P+P/3, &r); err != nil || r.Allowed || !r.SyncRetry {
		t.Fatalf("window 3, past the life: %+v %v, want a sync retry", r, err)
	}

	// Views a coordinator could not have sent are refused whole.
	const at = 2*sec + sec/2 // window 2
	for _, to := range []int64{-1, 1, 2, 2 + wire.MaxStandWindows + 1} {
		c3 := mustCore(t, cfg)
		if err := c3.Decide(0, []byte("k"), 1, at, &r); err != nil {
			t.Fatal(err)
		}
		out, err := c3.SyncOut(at, nil)
		if err != nil {
			t.Fatal(err)
		}
		var b wire.Batch
		if err := b.UnmarshalMsg(out); err != nil {
			t.Fatal(err)
		}
		rp := wire.Reply{Version: wire.Version, Seq: b.Seq, At: at, Entries: []wire.View{{Limiter: "api", Key: "k",
			Window: 2, Lease: 0, Isolates: 1, Stand: 1, StandTo: to, Life: 10 * sec}}}
		if err := c3.SyncIn(rp.AppendMsg(nil), at); err == nil {
			t.Errorf("StandTo %d (a view of window 2) accepted", to)
		}
	}
}

// decideOne returns a function deciding one request of cost 1 on limiter
// 0's key "k" of c at a time, failing t on an error.
func decideOne(t *testing.T, c *core.Core) func(now int64) core.Result {
	return func(now int64) core.Result {
		t.Helper()
		var r core.Result
		if err := c.Decide(0, []byte("k"), 1, now, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
}
