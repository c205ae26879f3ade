package coordinator

import (
	"errors"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// FuzzDecodeBatch runs the request decoder of POST /v1/sync on arbitrary
// bytes: it must never panic, every error must name a field, and every
// batch it accepts must re-encode to bytes that decode to the same batch.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(batch("a", 1, 5, wire.Delta{Limiter: "fw", Key: "k", Window: 3, Delta: 1, Demand: 2}).AppendMsg(nil))
	f.Add(batch("iso", 1<<40, -1).AppendMsg(nil))
	f.Add([]byte{0x85, 0xa1, 'v', 0x01})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x81, 0xa1, 'e', 0xdd, 0x7f, 0xff, 0xff, 0xff})
	m, err := merge.NewMerger(testConfig(), nil, merge.MergerOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := DecodeBatch(body)
		if err != nil {
			var fe *wire.FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			return
		}
		again, err := DecodeBatch(b.AppendMsg(nil))
		if err != nil {
			t.Fatalf("re-encoded batch rejected: %v", err)
		}
		if again.Isolate != b.Isolate || again.Seq != b.Seq || again.At != b.At || len(again.Entries) != len(b.Entries) {
			t.Fatalf("round trip changed the batch: %+v vs %+v", b, again)
		}
		for i := range b.Entries {
			if b.Entries[i] != again.Entries[i] {
				t.Fatalf("entry %d changed", i)
			}
		}
		if err := m.Check(b); err != nil {
			var fe *wire.FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("check error without a field: %v", err)
			}
		}
	})
}

// FuzzTokenRoles runs the --token grammar (ParseTokens) on arbitrary text
// and the edge role's limiter check on arbitrary batches: parsing never
// panics, an error never shows a whole token, every grant it returns has
// known roles and limiters only with edge; and a batch passes the check of
// an edge granted "fw" only when every entry, signal, denial and ask
// names fw.
func FuzzTokenRoles(f *testing.F) {
	f.Add("k1:edge=fw|sw,k2:read+admin,k3", batch("a", 1, 5, wire.Delta{Limiter: "fw", Key: "k", Window: 3, Delta: 1}).AppendMsg(nil))
	f.Add("tok:edge=", batch("a", 1, 5, wire.Delta{Limiter: "sw", Key: "k", Window: 3, Delta: 1}).AppendMsg(nil))
	f.Add("a:b:c,,:read", []byte{0x80})
	edge := &principal{roles: RoleEdge, limiters: map[string]bool{"fw": true}}
	f.Fuzz(func(t *testing.T, spec string, body []byte) {
		toks, grants, err := ParseTokens(spec)
		if err != nil {
			for _, item := range strings.Split(spec, ",") {
				// The error may name a token by its redacted form (its first 4
				// bytes quoted), which a token ending in `"` would match.
				tok, _, _ := strings.Cut(strings.TrimSpace(item), ":")
				if len(tok) > 4 && strings.Contains(strings.ReplaceAll(err.Error(), redact(tok), ""), tok) {
					t.Fatalf("error %q shows token %q", err, tok)
				}
			}
		}
		for _, tok := range toks {
			if tok == "" || strings.ContainsAny(tok, ",:") {
				t.Fatalf("token %q", tok)
			}
		}
		for _, g := range grants {
			if g.Roles == 0 || g.Roles&^RoleAll != 0 || len(g.Limiters) > 0 && g.Roles&RoleEdge == 0 {
				t.Fatalf("grant %+v", g)
			}
		}
		b, err := DecodeBatch(body)
		if err != nil {
			return
		}
		all := true
		for _, e := range b.Entries {
			all = all && e.Limiter == "fw"
		}
		for _, s := range b.Signals {
			all = all && s.Limiter == "fw"
		}
		for _, d := range append(b.Denials, b.Asks...) {
			all = all && d.Limiter == "fw"
		}
		reason := func(p *principal) func(string) string {
			return func(l string) string {
				if !p.grants(l) {
					return uncountedForbidden
				}
				return ""
			}
		}
		if names, _, _ := stripUncounted(&wire.Batch{Entries: b.Entries, Signals: b.Signals, Denials: b.Denials, Asks: b.Asks}, reason(nil)); names != nil {
			t.Fatalf("no principal (no tokens) took out %q", names)
		}
		n := len(b.Entries) + len(b.Signals) + len(b.Denials) + len(b.Asks)
		names, reasons, by := stripUncounted(b, reason(edge))
		if all != (names == nil) || len(names) != len(reasons) || n-by[uncountedForbidden] != len(b.Entries)+len(b.Signals)+len(b.Denials)+len(b.Asks) {
			t.Fatalf("batch %+v: took out %q (%v), want all kept %v", b, names, by, all)
		}
		for _, l := range names {
			if l == "fw" {
				t.Fatalf("took out the granted limiter: %q", names)
			}
		}
		for _, e := range b.Entries {
			if e.Limiter != "fw" {
				t.Fatalf("entry of %q kept", e.Limiter)
			}
		}
	})
}
