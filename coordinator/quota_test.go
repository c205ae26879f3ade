package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// One token naming new keys as fast as it can (a flood, or a bug) is
// refused once it named its quota of distinct keys this hour, 429 with
// Retry-After to the hour's end, nothing of the refused batches applied;
// another token syncs on, its keys counted; the hour after, the token is
// served again. The same for isolate ids. Before, nothing bounded what one
// token named: it filled the store for every token.
func TestTokenQuotas(t *testing.T) {
	const quota = 1000
	var logs syncBuffer
	c, clk, srv := newTestServer(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		o.Tokens = []string{"flood", "other"}
		o.TokenKeysPerHour, o.TokenIsolatesPerHour = quota, 50
	})
	// Start 10 minutes into an hour.
	clk.set((clk.now()/int64(time.Hour)+1)*int64(time.Hour) + int64(10*time.Minute))
	as := func(token string) map[string]string { return map[string]string{"Authorization": "Bearer " + token} }
	seqs := map[string]int64{}
	post := func(token, iso string, keys ...string) (int, []byte, string) {
		t.Helper()
		es := make([]wire.Delta, len(keys))
		for i, k := range keys {
			es[i] = wire.Delta{Limiter: "fw", Key: k, Window: clk.now() / sec, Delta: 1, Demand: 1}
		}
		seqs[token+iso]++
		st, body, h := httpPostHdr(t, srv, MsgpackContentType, batch(iso, seqs[token+iso], clk.now(), es...).AppendMsg(nil), as(token))
		if st != 200 {
			seqs[token+iso]-- // not applied: the same number again
		}
		return st, body, h.Get("Retry-After")
	}
	named := 0
	for i := 0; ; i++ {
		keys := make([]string, 50)
		for j := range keys {
			keys[j] = "flood-" + strconv.Itoa(i*50+j)
		}
		st, body, ra := post("flood", "f1", keys...)
		if st == 429 {
			p := decodeProblem(t, body)
			if p.Type != "urn:edgelimit:problem:quota" || !strings.Contains(p.Detail, "more than 1000 distinct keys") || ra != "3000" {
				t.Fatalf("refusal: %+v, Retry-After %q (want 3000: 50 min to the hour's end)", p, ra)
			}
			break
		}
		if st != 200 {
			t.Fatalf("flood batch %d: %d %s", i, st, body)
		}
		named += len(keys)
		if named > 2*quota {
			t.Fatalf("%d distinct keys named, none refused (quota %d)", named, quota)
		}
	}
	// Refused within 5% of the quota (a sketch's count).
	if named < quota*95/100 || named > quota*105/100 {
		t.Errorf("refused after %d distinct keys, quota %d", named, quota)
	}
	// Refused: nothing of it applied; a key it named before counts.
	if ks := getKey(t, c, "fw", "flood-0"); ks.Count != 1 {
		t.Errorf("flood-0 count %d, want 1", ks.Count)
	}
	last := "flood-" + strconv.Itoa(named+49)
	if ks := getKey(t, c, "fw", last); ks.Count != 0 {
		t.Errorf("%s (refused batch) count %d, want 0", last, ks.Count)
	}
	// Every later batch of the token is refused this hour, even one naming
	// a key it named before.
	if st, _, _ := post("flood", "f1", "flood-0"); st != 429 {
		t.Errorf("known key after the refusal: %d, want 429", st)
	}
	// Said once in the log for the hour, with the token's scope, not the
	// token.
	if n := strings.Count(logs.String(), "over its quota"); n != 1 || !strings.Contains(logs.String(), "scope="+tokenScope("flood")) || strings.Contains(logs.String(), "Bearer") {
		t.Errorf("%d log lines of the refusals:\n%s", n, logs.String())
	}
	// The other token is not touched, and may name the flood's keys.
	for i := 0; i < 10; i++ {
		if st, body, _ := post("other", "o1", fmt.Sprintf("other-%d", i), "flood-1"); st != 200 {
			t.Fatalf("other token: %d %s", st, body)
		}
	}
	if ks := getKey(t, c, "fw", "flood-1"); ks.Count != 11 {
		t.Errorf("flood-1 count %d, want 11 (1 of the flood, 10 of the other)", ks.Count)
	}
	// The next hour the flood's token is served again.
	clk.add(int64(50 * time.Minute))
	if st, body, _ := post("flood", "f1", "flood-0"); st != 200 {
		t.Errorf("the next hour: %d %s", st, body)
	}

	// Isolate ids: the 51st distinct id (give or take the sketch) this
	// hour is refused.
	ids := 0
	for ; ids < 200; ids++ {
		st, body, _ := post("other", "iso-"+strconv.Itoa(ids), "shared")
		if st == 429 {
			if !strings.Contains(decodeProblem(t, body).Detail, "more than 50 distinct isolates") {
				t.Fatalf("isolates refusal: %s", body)
			}
			break
		}
		if st != 200 {
			t.Fatalf("isolate %d: %d %s", ids, st, body)
		}
	}
	if ids < 48 || ids > 52 {
		t.Errorf("refused at the %dth isolate id, quota 50", ids+1)
	}
}

// Without tokens (one trusted fleet) nothing is counted; a negative quota
// is none.
func TestNoQuotaWithoutTokens(t *testing.T) {
	for _, mod := range []func(*Options){
		func(o *Options) { o.TokenKeysPerHour = 100 },
		func(o *Options) { o.Tokens, o.TokenKeysPerHour = []string{"tok"}, -1 },
	} {
		_, clk, srv := newTestServer(t, mod)
		hdr := map[string]string{"Authorization": "Bearer tok"}
		for i := 0; i < 10; i++ {
			es := make([]wire.Delta, 50)
			for j := range es {
				es[j] = wire.Delta{Limiter: "fw", Key: fmt.Sprintf("k-%d-%d", i, j), Window: clk.now() / sec, Delta: 1}
			}
			if st, body := httpPost(t, srv, MsgpackContentType, batch("a", int64(i+1), clk.now(), es...).AppendMsg(nil), hdr); st != 200 {
				t.Fatalf("batch %d: %d %s", i, st, body)
			}
		}
	}
}

// TestTokenMarksQuotaOverRedis: over Redis an isolate leaves a sequence
// mark in every bucket its batches write to; one token naming 512 keys
// under ever new isolate ids, far under its key and isolate quotas, filled
// a 64 MB Redis in about 10 s with marks that live a day, and every other
// token's syncs failed (OOM). The (isolate, bucket) pairs a token names
// are counted too: past its quota its batches are refused 429, and the
// other token syncs on.
func TestTokenMarksQuotaOverRedis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srvR := startRedisServer(ctx, t)
	rs, err := openURL(ctx, "redis://"+srvR.Addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	const quota = 2000
	c, err := Open(Options{Store: rs, Config: totalConfig(), Tokens: []string{"att", "vic"}, TokenMarksPerHour: quota})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	defer func() { srv.Close(); c.Close() }()
	post := func(token, iso string, seq int64, keys int) (int, []byte) {
		now := time.Now().UnixNano()
		b := &wire.Batch{Version: wire.Version, Isolate: iso, Seq: seq, At: now}
		for k := range keys {
			b.Entries = append(b.Entries, wire.Delta{Limiter: "total", Key: "key-" + strconv.Itoa(k), Window: now / int64(time.Hour), Delta: 1, Demand: 1})
		}
		st, body, _ := httpPostHdr(t, srv, MsgpackContentType, b.AppendMsg(nil), map[string]string{"Authorization": "Bearer " + token})
		return st, body
	}
	for i := 0; ; i++ {
		st, body := post("att", "att-"+strconv.Itoa(i), 1, 300)
		if st == 429 {
			if p := decodeProblem(t, body); !strings.Contains(p.Detail, "(isolate, Redis bucket) pairs") || !strings.Contains(p.Detail, "--token-marks") {
				t.Fatalf("refusal: %+v", p)
			}
			break
		}
		if st != 200 {
			t.Fatalf("batch %d: %d %s", i, st, body)
		}
		if i > 50 { // 15,000 keys' worth of pairs
			t.Fatalf("%d batches of 300 keys under new ids, none refused (quota %d pairs)", i, quota)
		}
	}
	if st, body := post("vic", "vic-1", 1, 1); st != 200 {
		t.Fatalf("the other token after the refusal: %d %s", st, body)
	}
}
