package coordinator

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

const (
	secretA = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
	secretX = "ffffffffffffffffffffffffffffffff"
)

// withSecret returns b carrying secret.
func withSecret(b *wire.Batch, secret string) *wire.Batch {
	b.Secret = secret
	return b
}

// TestIsolateIdentityCannotBeStolen is issue 21's probe: a client holding
// the same token as an edge, and its isolate id, sends the batches that
// used to force the isolate to reincarnate (hw+1, a replay of hw, seq 1).
// Without the isolate's secret every one is refused 409 seq_identity,
// naming no sequence number, and the real isolate keeps its sequence
// (no reincarnation) and its count. A second token's client cannot touch
// it either (its own namespace of ids).
func TestIsolateIdentityCannotBeStolen(t *testing.T) {
	c, clk, srv := newTestServer(t, func(o *Options) { o.Tokens = []string{"tok-a", "tok-b"} })
	for seq := int64(1); seq <= 2; seq++ {
		if st, _, p := syncAs(t, srv, "tok-a", withSecret(batch("iso-1", seq, clk.now(), fwDelta("k", 1)), secretA)); st != 200 {
			t.Fatalf("isolate seq %d: %d %+v", seq, st, p)
		}
	}
	for _, tc := range []struct {
		name   string
		seq    int64
		secret string
	}{
		{"hw+1 without a secret", 3, ""},
		{"hw+1 with another secret", 3, secretX},
		{"replay of hw without a secret", 2, ""},
		{"seq 1 with another secret", 1, secretX},
		{"far ahead", 1 << 40, secretX},
	} {
		st, _, p := syncAs(t, srv, "tok-a", withSecret(batch("iso-1", tc.seq, clk.now(), fwDelta("k", 1000)), tc.secret))
		if st != 409 || p.Type != "urn:edgelimit:problem:seq_identity" || p.Field != "sec" {
			t.Fatalf("%s: %d %+v, want 409 seq_identity", tc.name, st, p)
		}
		if strings.ContainsAny(p.Detail, "0123456789") {
			t.Fatalf("%s: the refusal tells numbers: %q", tc.name, p.Detail)
		}
	}
	// Token b's client is in its own namespace: its "iso-1" is another isolate.
	if st, _, p := syncAs(t, srv, "tok-b", withSecret(batch("iso-1", 1, clk.now(), fwDelta("k", 10)), secretX)); st != 200 {
		t.Fatalf("token b's own iso-1: %d %+v", st, p)
	}
	// The real isolate goes on with seq 3, as if nothing happened.
	st, rp, p := syncAs(t, srv, "tok-a", withSecret(batch("iso-1", 3, clk.now(), fwDelta("k", 1)), secretA))
	if st != 200 {
		t.Fatalf("isolate seq 3 after the attack: %d %+v", st, p)
	}
	if got := viewOf(t, rp, "fw", "k").Count; got != 13 {
		t.Fatalf("count %d, want 13 (3 from the isolate, 10 from token b's; none of the refused 1000s)", got)
	}
	// Its retry of seq 3 is still a retry (same secret, same bytes).
	if st, _, p := syncAs(t, srv, "tok-a", withSecret(batch("iso-1", 3, clk.now(), fwDelta("k", 1)), secretA)); st != 200 {
		t.Fatalf("retry of seq 3: %d %+v", st, p)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Count != 13 {
		t.Fatalf("stored count %d, want 13", ks.Count)
	}
}

// TestIsolateSecretSurvivesRestart: the secret's hash is persisted with
// the high-water mark (Pebble on disk): after a restart of the
// coordinator, a batch without the secret is still refused and the
// isolate's next batch applies. An isolate whose first batch carried no
// secret (an older host) stays bound to none.
func TestIsolateSecretSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Coordinator, *httptest.Server) {
		clk := &fakeClock{}
		clk.set(t0)
		c, err := Open(Options{Dir: dir, Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(c.Handler())
		return c, srv
	}
	c, srv := open()
	if st, _, p := syncAs(t, srv, "", withSecret(batch("iso-1", 1, t0, fwDelta("k", 1)), secretA)); st != 200 {
		t.Fatalf("seq 1: %d %+v", st, p)
	}
	if st, _, p := syncAs(t, srv, "", batch("old-host", 1, t0, fwDelta("k", 1))); st != 200 {
		t.Fatalf("old host seq 1: %d %+v", st, p)
	}
	srv.Close()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, srv = open()
	defer func() { srv.Close(); c.Close() }()
	if st, _, p := syncAs(t, srv, "", batch("iso-1", 2, t0, fwDelta("k", 100))); st != 409 || p.Type != "urn:edgelimit:problem:seq_identity" {
		t.Fatalf("seq 2 without the secret after a restart: %d %+v", st, p)
	}
	if st, _, p := syncAs(t, srv, "", withSecret(batch("iso-1", 2, t0, fwDelta("k", 1)), secretA)); st != 200 {
		t.Fatalf("seq 2 with the secret after a restart: %d %+v", st, p)
	}
	if st, _, p := syncAs(t, srv, "", batch("old-host", 2, t0, fwDelta("k", 1))); st != 200 {
		t.Fatalf("old host seq 2: %d %+v", st, p)
	}
	if st, _, p := syncAs(t, srv, "", withSecret(batch("old-host", 3, t0, fwDelta("k", 1)), secretX)); st != 409 || p.Type != "urn:edgelimit:problem:seq_identity" {
		t.Fatalf("a secret for an id bound to none: %d %+v", st, p)
	}
	if ks, err := c.KeyState(context.Background(), "fw", "k"); err != nil || ks.Count != 4 {
		t.Fatalf("count %+v %v, want 4", ks, err)
	}
}
