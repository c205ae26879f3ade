package coordinator

import (
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// upstreamConfig: "fw" follows no upstream; "up" does (default max_pause,
// 1 h) and "up10m" with max_pause 10 minutes.
func upstreamConfig() wire.Config {
	cfg := testConfig()
	cfg.Limiters = append(cfg.Limiters,
		wire.LimiterConfig{Name: "up", Algorithm: wire.FixedWindow, Limit: 100, Period: sec, Upstream: &wire.UpstreamConfig{}},
		wire.LimiterConfig{Name: "up10m", Algorithm: wire.FixedWindow, Limit: 100, Period: sec, Upstream: &wire.UpstreamConfig{MaxPause: 600 * sec}},
		wire.LimiterConfig{Name: "upa", Algorithm: wire.FixedWindow, Limit: 100, Period: sec, Mode: wire.Auto, Upstream: &wire.UpstreamConfig{}})
	return cfg
}

// signalBatch is batch seq of iso (with its secret) reporting one unit of
// (limiter, key) and the signal sg (none when sg.Limiter is empty: key
// then names the entry's limiter and key, "limiter/key").
func signalBatch(iso string, seq, at int64, sg wire.Signal) *wire.Batch {
	if sg.Limiter == "" {
		l, k, _ := strings.Cut(sg.Key, "/")
		b := batch(iso, seq, at, wire.Delta{Limiter: l, Key: k, Window: at / sec, Delta: 1, Demand: 1})
		b.Secret = strings.Repeat(iso[len(iso)-1:], 32)
		return b
	}
	b := batch(iso, seq, at, wire.Delta{Limiter: sg.Limiter, Key: sg.Key, Window: at / sec, Delta: 1, Demand: 1})
	b.Secret = strings.Repeat(iso[len(iso)-1:], 32)
	b.Signals = []wire.Signal{sg}
	return b
}

// TestUpstreamSignalsWhoMay is issue 21's upstream probe over real HTTP
// with two tokens: a 29-day pause on a limiter without "upstream" is
// ignored and counted (the batch's delta still counts), on one with it
// capped at its max_pause (1 h by default); a token whose one client
// reports a limit of 1 under two made-up isolate ids is one vote, and
// cannot lower the limit of a key token a's isolate uses; once token a
// reports too, the two tokens' votes agree (upper median). On a leased key
// that only token a's isolates use, their two reports agree alone, until
// another token's isolate uses the key.
func TestUpstreamSignalsWhoMay(t *testing.T) {
	c, clk, srv := newTestServer(t, func(o *Options) {
		o.Tokens = []string{"tok-a", "tok-b"}
		o.Config = upstreamConfig()
	})
	const month = 29 * 24 * 3600 * sec
	now := clk.now()
	if st, _, p := syncAs(t, srv, "tok-b", signalBatch("b1", 1, now, wire.Signal{Limiter: "fw", Key: "k", Pause: month})); st != 200 {
		t.Fatalf("signal on fw: %d %+v", st, p)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Upstream != nil || ks.Count != 1 {
		t.Fatalf("fw/k after a signal: upstream %+v count %d, want none and 1", ks.Upstream, ks.Count)
	}
	if got := metricValue(t, metricsTextAs(t, srv.URL, "tok-a"), "edgelimit_coordinator_upstream_signals_ignored_total"); got != 1 {
		t.Fatalf("signals ignored %v, want 1", got)
	}
	for i, tc := range []struct {
		limiter string
		want    int64
	}{{"up", 3600 * sec}, {"up10m", 600 * sec}} {
		if st, _, p := syncAs(t, srv, "tok-b", signalBatch("b1", int64(2+i), now, wire.Signal{Limiter: tc.limiter, Key: "k", Pause: month})); st != 200 {
			t.Fatalf("signal on %s: %d %+v", tc.limiter, st, p)
		}
		if ks := getKey(t, c, tc.limiter, "k"); ks.Upstream == nil || ks.Upstream.PausedNS != tc.want {
			t.Fatalf("%s/k paused %+v, want %d ns", tc.limiter, ks.Upstream, tc.want)
		}
	}
	// Token a's isolate uses up/q; token b's client reports a limit of 1
	// under two ids.
	if st, _, p := syncAs(t, srv, "tok-a", withSecret(batch("a1", 1, now, wire.Delta{Limiter: "up", Key: "q", Window: now / sec, Delta: 1}), secretA)); st != 200 {
		t.Fatalf("a1: %d %+v", st, p)
	}
	for _, iso := range []string{"b2", "b3"} {
		if st, _, p := syncAs(t, srv, "tok-b", signalBatch(iso, 1, now, wire.Signal{Limiter: "up", Key: "q", Limit: 1})); st != 200 {
			t.Fatalf("%s: %d %+v", iso, st, p)
		}
	}
	ks := getKey(t, c, "up", "q")
	if ks.Limit != 100 || ks.Upstream == nil || ks.Upstream.Reporters != 2 || ks.Upstream.Announced != 0 {
		t.Fatalf("up/q after one token's two ids reported 1: limit %d upstream %+v; want 100, two reports, nothing agreed", ks.Limit, ks.Upstream)
	}
	if st, _, p := syncAs(t, srv, "tok-a", withSecret(&wire.Batch{Version: wire.Version, Isolate: "a1", Seq: 2, At: now,
		Signals: []wire.Signal{{Limiter: "up", Key: "q", Limit: 50}}}, secretA)); st != 200 {
		t.Fatalf("a1 reports 50: %d %+v", st, p)
	}
	if ks := getKey(t, c, "up", "q"); ks.Limit != 50 || ks.Upstream.Reporters != 3 || ks.Upstream.Announced != 50 {
		t.Fatalf("up/q after tokens a (50) and b (1, 1) reported: limit %d upstream %+v; want 50 from three reports", ks.Limit, ks.Upstream)
	}
	// A leased key only token a's isolates use: their reports agree alone.
	for _, iso := range []string{"a5", "a6"} {
		if st, _, p := syncAs(t, srv, "tok-a", signalBatch(iso, 1, now, wire.Signal{Limiter: "upa", Key: "solo", Limit: 10})); st != 200 {
			t.Fatalf("%s: %d %+v", iso, st, p)
		}
	}
	if ks := getKey(t, c, "upa", "solo"); ks.Limit != 10 || ks.Upstream.Announced != 10 {
		t.Fatalf("upa/solo reported 10 by its only token's two isolates: limit %d upstream %+v; want 10", ks.Limit, ks.Upstream)
	}
	if st, _, p := syncAs(t, srv, "tok-b", signalBatch("b7", 1, now, wire.Signal{Key: "upa/solo"})); st != 200 {
		t.Fatalf("b7: %d %+v", st, p)
	}
	if ks := getKey(t, c, "upa", "solo"); ks.Limit != 100 || ks.Upstream.Announced != 0 {
		t.Fatalf("upa/solo once token b's isolate uses it: limit %d upstream %+v; want 100 (token a alone no longer agrees)", ks.Limit, ks.Upstream)
	}
}
