//go:build !wasip1

// The fleet tests here merge through the coordinator (a host package, not
// built for wasip1).

package core_test

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"
	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// upFleet is isolates of one config syncing through the real merge code
// (merge.Merger over in-memory Pebble), under virtual time.
type upFleet struct {
	t    *testing.T
	m    *merge.Merger
	isos []*core.Core
	last wire.Batch // the last batch sync sent
}

func newUpFleet(t *testing.T, lc wire.LimiterConfig, n int, standalone bool) *upFleet {
	t.Helper()
	return newUpFleetWith(t, lc, n, standalone, merge.MergerOptions{})
}

// newUpFleetWith is newUpFleet with the merger's options.
func newUpFleetWith(t *testing.T, lc wire.LimiterConfig, n int, standalone bool, opts merge.MergerOptions) *upFleet {
	t.Helper()
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{lc}}
	store, err := pebblestore.Open(vfs.NewMem(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	m, err := merge.NewMerger(cfg, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &upFleet{t: t, m: m}
	for i := 0; i < n; i++ {
		c := cfg
		c.IsolateID = "iso-" + string(rune('a'+i))
		c.Standalone = standalone
		iso, err := core.New(c)
		if err != nil {
			t.Fatal(err)
		}
		f.isos = append(f.isos, iso)
	}
	return f
}

// sync runs one sync of isolate i at now; it reports whether a batch went.
func (f *upFleet) sync(i int, now int64) bool {
	f.t.Helper()
	out, err := f.isos[i].SyncOut(now, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(out) == 0 {
		return false
	}
	var b wire.Batch
	if err := b.UnmarshalMsg(out); err != nil {
		f.t.Fatalf("the module's batch does not decode: %v", err)
	}
	f.last = b
	rp, err := f.m.Apply(&b, now)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.m.Commit(now); err != nil {
		f.t.Fatal(err)
	}
	if err := f.isos[i].SyncIn(rp.AppendMsg(nil), now); err != nil {
		f.t.Fatal(err)
	}
	return true
}

func (f *upFleet) decide(i int, key string, now int64) core.Result {
	f.t.Helper()
	var r core.Result
	if err := f.isos[i].Decide(0, []byte(key), 1, now, &r); err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *upFleet) observe(i int, key string, status int64, now int64, h ...[2]string) wire.Observed {
	f.t.Helper()
	var o wire.Observed
	if err := f.isos[i].Observe(0, []byte(key), status, h, false, now, &o); err != nil {
		f.t.Fatal(err)
	}
	return o
}

func llmLimiter(mode string) wire.LimiterConfig {
	return wire.LimiterConfig{Name: "llm", Algorithm: wire.FixedWindow, Limit: 10, Period: sec, Mode: mode,
		Upstream: &wire.UpstreamConfig{CircuitFailures: 3, CircuitOpen: sec}}
}

// A 429 with Retry-After pauses the key in the observing isolate at once
// and, through the coordinator, in another isolate with its next sync.
func TestPauseReachesTheFleet(t *testing.T) {
	for _, mode := range []string{wire.Approximate, wire.Strict} {
		t.Run(mode, func(t *testing.T) {
			f := newUpFleet(t, llmLimiter(mode), 2, false)
			t0 := 1000 * sec
			for i := range f.isos {
				f.decide(i, "k", t0)
				f.sync(i, t0)
			}
			o := f.observe(0, "k", 429, t0+1, [2]string{"Retry-After", "30"})
			if o.Paused != 30*sec || !o.Sync {
				t.Fatalf("observe: %+v, want a 30 s pause and a sync", o)
			}
			if r := f.decide(0, "k", t0+2); r.Allowed || r.RetryAfter < 29*sec {
				t.Fatalf("observing isolate: %+v, want denied for the pause", r)
			}
			if r := f.decide(0, "other", t0+2); !r.Allowed && mode == wire.Approximate {
				t.Fatalf("another key: %+v, want allowed (the pause is per key)", r)
			}
			if !f.sync(0, t0+3) {
				t.Fatal("the observing isolate has the pause to report but cut no batch")
			}
			// The other isolate learns with its next sync of the key.
			f.decide(1, "k", t0+4)
			f.sync(1, t0+5)
			r := f.decide(1, "k", t0+6)
			if r.Allowed || r.RetryAfter < 29*sec || r.RetryAfter > 30*sec {
				t.Fatalf("other isolate after its sync: %+v, want denied for ~30 s", r)
			}
			st := f.isos[1].Stats()
			if st.UpstreamPauses != 1 {
				t.Errorf("other isolate's upstream_pauses = %d, want 1", st.UpstreamPauses)
			}
			// Denials during the pause are quiet: nothing to sync for
			// them (the isolate sends an empty batch, a heartbeat that
			// would bring news of a reset: resets.go).
			if f.sync(1, t0+7) && (len(f.last.Entries) != 0 || len(f.last.Signals) != 0) {
				t.Errorf("denials during a pause made the isolate sync %+v", f.last)
			}
			later := t0 + 31*sec
			for i := range f.isos {
				if r := f.decide(i, "k", later); !r.Allowed && !r.SyncRetry {
					t.Errorf("isolate %d after the pause: %+v, want allowed (or a lease wait)", i, r)
				}
			}
		})
	}
}

// A quota at 0 pauses until its reset; a pause is capped by max_pause.
func TestQuotaAtZeroPausesUntilReset(t *testing.T) {
	lc := llmLimiter(wire.Approximate)
	lc.Upstream.MaxPause = 60 * sec
	f := newUpFleet(t, lc, 1, true)
	o := f.observe(0, "k", 200, 10*sec, [2]string{"X-RateLimit-Remaining", "0"}, [2]string{"X-RateLimit-Reset", "2"})
	if o.Paused != 2*sec {
		t.Fatalf("remaining 0, reset 2: paused %d, want 2 s", o.Paused)
	}
	if o := f.observe(0, "j", 429, 10*sec, [2]string{"Retry-After", "86400"}); o.Paused != 60*sec {
		t.Fatalf("Retry-After of a day with max_pause 60s: paused %d, want 60 s", o.Paused)
	}
	if o := f.observe(0, "i", 429, 10*sec); o.Paused < sec/2 || o.Paused > sec {
		t.Fatalf("429 without a hint: paused %d, want a jittered backoff in [0.5 s, 1 s]", o.Paused)
	}
}

// Three failures open the circuit in the fleet; after the open time one
// isolate is granted the probe and sends exactly one request; its success
// closes the circuit everywhere.
func TestCircuitOneProbeAcrossTheFleet(t *testing.T) {
	f := newUpFleet(t, llmLimiter(wire.Approximate), 3, false)
	t0 := 1000 * sec
	for i := range f.isos {
		f.decide(i, "k", t0)
		f.sync(i, t0)
	}
	var o wire.Observed
	for j := int64(0); j < 3; j++ {
		o = f.observe(0, "k", 502, t0+10+j)
	}
	if o.Circuit != wire.CircuitOpen {
		t.Fatalf("after 3 failures: circuit %d, want open", o.Circuit)
	}
	f.sync(0, t0+20)
	for i := 1; i < 3; i++ {
		f.decide(i, "k", t0+30) // admitted: it does not know yet
		f.sync(i, t0+40)
		if r := f.decide(i, "k", t0+50); r.Allowed {
			t.Fatalf("isolate %d after its sync: admitted, want the fleet's open circuit", i)
		}
	}
	// Past the open time (at most 1 s): each isolate asks for the probe.
	t1 := t0 + 2*sec
	probes := 0
	for round := 0; round < 3; round++ {
		for i := range f.isos {
			now := t1 + int64(round*10+i)*1e6
			if r := f.decide(i, "k", now); r.Allowed {
				probes++
			}
			f.sync(i, now)
		}
	}
	if probes != 1 {
		t.Fatalf("%d requests passed the half-open circuit, want one probe", probes)
	}
	// Find the prober: the isolate that reports the success.
	closed := false
	for i := range f.isos {
		if o := f.observe(i, "k", 200, t1+sec); o.Circuit == wire.CircuitClosed {
			closed = true
		}
	}
	if !closed {
		t.Fatal("the probe's success closed no circuit")
	}
	for i := range f.isos {
		f.sync(i, t1+sec+1)
	}
	for i := range f.isos {
		f.decide(i, "k", t1+sec+2)
		f.sync(i, t1+sec+3)
		if r := f.decide(i, "k", t1+sec+4); !r.Allowed {
			t.Errorf("isolate %d after the probe passed: %+v, want allowed", i, r)
		}
	}
}

// An isolate alone probes on its own; a failed probe reopens the circuit
// for longer.
func TestCircuitAlone(t *testing.T) {
	f := newUpFleet(t, llmLimiter(wire.Approximate), 1, true)
	t0 := 1000 * sec
	for j := int64(0); j < 3; j++ {
		f.observe(0, "k", 0, t0+j) // transport failures
	}
	if r := f.decide(0, "k", t0+10); r.Allowed || r.RetryAfter <= 0 || r.RetryAfter > sec {
		t.Fatalf("open circuit: %+v, want denied for at most the open time", r)
	}
	t1 := t0 + sec + 1
	if r := f.decide(0, "k", t1); !r.Allowed {
		t.Fatalf("half-open, alone: %+v, want the probe admitted", r)
	}
	if r := f.decide(0, "k", t1+1); r.Allowed {
		t.Fatal("a second request passed while the probe is in flight")
	}
	if o := f.observe(0, "k", 503, t1+2); o.Circuit != wire.CircuitOpen {
		t.Fatalf("failed probe: circuit %d, want open again", o.Circuit)
	}
	if r := f.decide(0, "k", t1+sec/2); r.Allowed {
		t.Fatal("admitted half a base open time after a failed probe (the backoff doubled)")
	}
	if st := f.isos[0].Stats(); st.CircuitOpens != 2 {
		t.Errorf("circuit_opens = %d, want 2", st.CircuitOpens)
	}
}

// An announced limit applies at once to the isolate that heard it, and to
// the fleet only once a second isolate confirms it; one isolate's low word
// cannot drag the fleet down; the configured limit caps it unless
// max_limit allows more.
func TestAnnouncedLimit(t *testing.T) {
	f := newUpFleet(t, llmLimiter(wire.Approximate), 3, false)
	t0 := 1000 * sec
	lim := [2]string{"X-RateLimit-Limit", "6"}
	for i := range f.isos {
		f.decide(i, "k", t0)
		f.sync(i, t0)
	}
	if o := f.observe(0, "k", 200, t0+1, lim); o.Limit != 6 {
		t.Fatalf("observing isolate's limit %d, want 6", o.Limit)
	}
	f.sync(0, t0+2)
	f.decide(1, "k", t0+3)
	f.sync(1, t0+4)
	if r := f.decide(1, "k", t0+5); r.Limit != 10 {
		t.Fatalf("one isolate's word moved another's limit to %d, want 10 still", r.Limit)
	}
	f.observe(1, "k", 200, t0+6, lim)
	f.sync(1, t0+7)
	f.decide(2, "k", t0+8)
	f.sync(2, t0+9)
	if r := f.decide(2, "k", t0+10); r.Limit != 6 {
		t.Fatalf("after two isolates reported 6, a third runs at %d, want 6", r.Limit)
	}
	// A liar reports 1: the upper median of {6, 6, 1} is 6.
	f.observe(2, "k", 200, t0+11, [2]string{"X-RateLimit-Limit", "1"})
	f.sync(2, t0+12)
	f.decide(0, "k", t0+13)
	f.sync(0, t0+14)
	if r := f.decide(0, "k", t0+15); r.Limit != 6 {
		t.Fatalf("one isolate reporting 1 moved the fleet to %d, want 6", r.Limit)
	}
	// Above the configuration: capped, unless max_limit allows it.
	if o := f.observe(0, "k", 200, t0+16, [2]string{"X-RateLimit-Limit", "50"}); o.Limit != 6 {
		// the fleet's agreed 6 still rules this isolate
		t.Fatalf("announcing 50 under a fleet limit of 6: %d", o.Limit)
	}
	g := newUpFleet(t, llmLimiter(wire.Approximate), 1, true)
	if o := g.observe(0, "k", 200, t0, [2]string{"X-RateLimit-Limit", "50"}); o.Limit != 10 {
		t.Fatalf("announced 50 with limit 10 and no max_limit: %d, want 10", o.Limit)
	}
	lc := llmLimiter(wire.Approximate)
	lc.Upstream.MaxLimit = 20
	h := newUpFleet(t, lc, 1, true)
	if o := h.observe(0, "k", 200, t0, [2]string{"X-RateLimit-Limit", "50"}); o.Limit != 20 {
		t.Fatalf("announced 50 with max_limit 20: %d, want 20", o.Limit)
	}
	// Live counters (remaining and reset) pause until the upstream's reset
	// instead: the limit is followed only when upstream.follow says always.
	counters := [][2]string{{"X-RateLimit-Limit", "6"}, {"X-RateLimit-Remaining", "3"}, {"X-RateLimit-Reset", "1"}}
	for _, tc := range []struct {
		follow string
		want   int64
	}{{wire.FollowAuto, 10}, {wire.FollowAlways, 6}, {wire.FollowNever, 10}} {
		lc := llmLimiter(wire.Approximate)
		lc.Upstream.Follow = tc.follow
		g := newUpFleet(t, lc, 1, true)
		if o := g.observe(0, "k", 200, t0, counters...); o.Limit != tc.want {
			t.Errorf("follow %q with live counters: limit %d, want %d", tc.follow, o.Limit, tc.want)
		}
	}
	lc = llmLimiter(wire.Approximate)
	lc.Upstream.Follow = wire.FollowNever
	if o := newUpFleet(t, lc, 1, true).observe(0, "k", 200, t0, lim); o.Limit != 10 {
		t.Errorf("follow never: limit %d, want 10", o.Limit)
	}
	// A policy with a window: 120 per minute is 2 per second.
	k := newUpFleet(t, llmLimiter(wire.Approximate), 1, true)
	if o := k.observe(0, "k", 200, t0, [2]string{"RateLimit-Policy", `"m";q=120;w=60`}); o.Limit != 2 {
		t.Fatalf("q=120;w=60 on a 1 s limiter: %d, want 2", o.Limit)
	}
	// Under one per period it is not followed, and says why: rounded up
	// to one it let a 1 s limiter admit 60 a minute against 1.
	for _, p := range []string{`"m";q=1;w=60`, `"m";q=59;w=60`} {
		k := newUpFleet(t, llmLimiter(wire.Approximate), 1, true)
		o := k.observe(0, "k", 200, t0, [2]string{"RateLimit-Policy", p})
		if o.Limit != 10 || !strings.Contains(o.Ignored, "under one per period") {
			t.Errorf("%s on a 1 s limiter of 10: limit %d, ignored %q; want 10 and why", p, o.Limit, o.Ignored)
		}
	}
}

// Bad observations are errors that change nothing.
func TestObserveBadInput(t *testing.T) {
	f := newUpFleet(t, llmLimiter(wire.Approximate), 1, true)
	var o wire.Observed
	for _, tc := range []struct {
		lim    int
		key    string
		status int64
	}{{5, "k", 429}, {0, "", 429}, {0, "k", -1}, {0, "k", 1000}} {
		if err := f.isos[0].Observe(tc.lim, []byte(tc.key), tc.status, nil, false, 1, &o); err == nil {
			t.Errorf("%+v: no error", tc)
		}
	}
	if r := f.decide(0, "k", 2); !r.Allowed {
		t.Fatal("a refused observation paused the key")
	}
}

// Observations of ever new keys with no sync keep the upstream state
// bounded by the key cap.
func TestUpstreamStateBoundedWithoutSync(t *testing.T) {
	lc := llmLimiter(wire.Approximate)
	cfg := wire.Config{Version: wire.Version, IsolateID: "iso", MaxKeys: 64, Limiters: []wire.LimiterConfig{lc}}
	c, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var o wire.Observed
	for i := 0; i < 20000; i++ {
		key := []byte("key-" + string(rune('a'+i%26)) + "-" + itoa(i))
		if err := c.Observe(0, key, 429, [][2]string{{"Retry-After", "5"}}, false, int64(i+1)*1000, &o); err != nil {
			t.Fatal(err)
		}
	}
	// Every batch names at most the key cap's worth of signals.
	out, err := c.SyncOut(1e12, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b wire.Batch
	if err := b.UnmarshalMsg(out); err != nil {
		t.Fatal(err)
	}
	if len(b.Signals) == 0 || len(b.Signals) > 64 {
		t.Fatalf("%d signals after 20,000 keys with a cap of 64", len(b.Signals))
	}
	if st := c.Stats(); st.Keys > 64 {
		t.Fatalf("%d keys with a cap of 64", st.Keys)
	}
}

func itoa(i int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}
