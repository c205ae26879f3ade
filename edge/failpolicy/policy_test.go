package failpolicy

import (
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

const sec = int64(1e9)

func TestParseAndFor(t *testing.T) {
	for _, p := range []Policy{Open, Closed, LocalShare} {
		got, err := Parse(p.String())
		if err != nil || got != p {
			t.Errorf("Parse(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := Parse("half-open"); err == nil || !strings.HasPrefix(err.Error(), "failpolicy: ") {
		t.Errorf("Parse accepted a bad name or its error is unprefixed: %v", err)
	}
	if _, err := Parse(""); err == nil {
		t.Error("Parse accepted an empty name")
	}
	l := wire.LimiterConfig{FailPolicy: wire.FailClosed}
	if For(&l, LocalShare) != Closed {
		t.Error("a limiter's own policy must win over the default")
	}
	l.FailPolicy = ""
	if For(&l, LocalShare) != LocalShare {
		t.Error("a limiter without a policy must take the default")
	}
}

// TestApply: a fresh view always passes; a stale one passes under open,
// is denied under closed, and under local-share passes within
// max(limit/isolates, 1) per window per key.
func TestApply(t *testing.T) {
	q := Quota{Limit: 6, Period: sec, Isolates: 4} // share 1
	sh := NewShare[string](0)
	for _, p := range []Policy{Open, Closed, LocalShare} {
		for i := 0; i < 3; i++ {
			if v := Apply(p, false, sh, "k", 1, q, 5*sec); v != Pass {
				t.Fatalf("%v, fresh view: %v, want Pass", p, v)
			}
		}
	}
	if sh.Len() != 0 {
		t.Fatal("a fresh view must not count against the share")
	}
	for i := 0; i < 10; i++ {
		if v := Apply(Open, true, sh, "k", 1, q, 5*sec); v != Pass {
			t.Fatalf("open, stale: %v", v)
		}
		if v := Apply(Closed, true, sh, "k", 0, q, 5*sec); v != Deny {
			t.Fatalf("closed, stale: %v", v)
		}
	}
	passed := 0
	for i := 0; i < 10; i++ {
		if Apply(LocalShare, true, sh, "k", 1, q, 5*sec+int64(i)) == Pass {
			passed++
		}
	}
	if passed != 1 {
		t.Fatalf("local-share passed %d in one window, want the share 1 (6/4)", passed)
	}
	if Apply(LocalShare, true, sh, "other", 1, q, 5*sec) != Pass {
		t.Fatal("the share is per key")
	}
	if Apply(LocalShare, true, sh, "k", 1, q, 6*sec) != Pass {
		t.Fatal("a new window must bring a new share")
	}
}

func TestShareSizes(t *testing.T) {
	for _, tc := range []struct {
		q    Quota
		want int64
	}{
		{Quota{Limit: 6, Isolates: 4}, 1},
		{Quota{Limit: 100, Isolates: 4}, 25},
		{Quota{Limit: 3, Isolates: 64}, 1}, // never 0: every isolate may admit something
		{Quota{Limit: 10, Isolates: 0}, 10},
	} {
		if got := tc.q.Share(); got != tc.want {
			t.Errorf("%+v: share %d, want %d", tc.q, got, tc.want)
		}
	}
	q := Quota{Limit: 100, Period: sec, Isolates: 4}
	sh := NewShare[int](0)
	if !sh.Take(1, 20, q, 0) || sh.Take(1, 6, q, 0) || !sh.Take(1, 5, q, 0) || sh.Remaining(1, q, 0) != 0 {
		t.Fatal("a share of 25 must take 20 and 5, not 6 in between")
	}
	if !sh.Take(1, 0, q, 0) || sh.Remaining(1, q, 0) != 0 {
		t.Error("a peek (cost 0) must pass a used-up share and take nothing")
	}
	sh.Give(1, 5, q, 0)
	if sh.Remaining(1, q, 0) != 5 || !sh.Take(1, 5, q, 0) {
		t.Error("Give must return the cost to the share")
	}
	sh.Give(1, 5, q, 2*sec) // a later window: nothing to give back
	if sh.Remaining(1, q, 0) != 0 {
		t.Error("Give in another window changed this one")
	}
}

// TestShareBounded: the share tracks at most its cap of keys; once full, a
// new key is denied until a tracked window ends, then the ended ones are
// dropped.
func TestShareBounded(t *testing.T) {
	q := Quota{Limit: 10, Period: sec, Isolates: 1}
	sh := NewShare[int](100)
	for k := 0; k < 100; k++ {
		if !sh.Take(k, 1, q, 0) {
			t.Fatalf("key %d denied below the cap", k)
		}
	}
	for k := 100; k < 1000; k++ {
		if sh.Take(k, 1, q, sec/2) {
			t.Fatalf("key %d admitted past the cap within the window", k)
		}
	}
	if sh.Len() != 100 {
		t.Fatalf("%d keys tracked, cap 100", sh.Len())
	}
	if !sh.Take(5, 1, q, sec/2) {
		t.Fatal("a tracked key must still be served when the share is full")
	}
	if !sh.Take(1000, 1, q, sec) || sh.Len() != 1 {
		t.Fatalf("after the window ended a new key must get room (%d keys tracked)", sh.Len())
	}
}
