package merge

import (
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// One token's isolates, however many ids they sync under, do not push the
// other tokens' announced limits out of a key's reports (evictee): two
// tokens announce 5; a third token's 8 fresh isolate ids announce 100;
// the agreed limit stays 5. Before, the oldest report made room whatever
// its token: the third token's ids took all 8 places and the agreed limit
// fell to 0 (none: the configured 100).
func TestOneTokenCannotEvictOthersReports(t *testing.T) {
	lim := &wire.LimiterConfig{Name: "up", Algorithm: wire.FixedWindow, Limit: 100, Period: sec, Upstream: &wire.UpstreamConfig{}}
	st := newKeyState(lim, string(appendKeyStorageKey(nil, "up", "k")))
	now := t0
	const tokA, tokB, tokD = 11, 22, 33
	m := &Merger{}
	m.applySignal(st, "a1", 1, tokA, &wire.Signal{Limiter: "up", Key: "k", Limit: 5}, now)
	m.applySignal(st, "b1", 2, tokB, &wire.Signal{Limiter: "up", Key: "k", Limit: 5}, now+1)
	if got := st.agreedLimit("k", now+2); got != 5 {
		t.Fatalf("two tokens announcing 5: agreed %d, want 5", got)
	}
	for i := range uint64(3 * maxReporters) {
		m.applySignal(st, "d", 100+i, tokD, &wire.Signal{Limiter: "up", Key: "k", Limit: 100}, now+10+int64(i))
	}
	if got := st.agreedLimit("k", now+100); got != 5 {
		t.Errorf("after a third token's %d isolates announced 100: agreed %d, want 5 (votes 5, 5, 100)", 3*maxReporters, got)
	}
	if len(st.up.reps) != maxReporters {
		t.Errorf("%d reports kept, want %d", len(st.up.reps), maxReporters)
	}
	// A token that holds the most makes room first, also against a newer
	// report of another token: A's second isolate displaces one of D's.
	m.applySignal(st, "a2", 3, tokA, &wire.Signal{Limiter: "up", Key: "k", Limit: 6}, now+200)
	byTok := map[uint64]int{}
	for _, r := range st.up.reps {
		byTok[r.tok]++
	}
	if byTok[tokA] != 2 || byTok[tokB] != 1 || byTok[tokD] != maxReporters-3 {
		t.Errorf("reports per token %v; want A 2, B 1, D %d", byTok, maxReporters-3)
	}
}
