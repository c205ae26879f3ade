package merge

import (
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestSharedMarkTTL: a part of windowed entries keeps its mark until its
// newest window is stale (window w+1 ended), plus a period and a minute,
// at most the isolate's TTL; a part with a token bucket entry an hour (it
// lived the isolate's day); one with no entries the isolate's TTL.
func TestSharedMarkTTL(t *testing.T) {
	m, err := NewMerger(testConfig(), emptyStore{}, MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const sec = int64(time.Second)
	iso := int64(24 * time.Hour)
	now := 1000*sec + sec/2 // window 1000 of the 1 s limiters
	for _, tc := range []struct {
		name    string
		entries []wire.Delta
		want    int64
	}{
		{"fixed window, current", []wire.Delta{{Limiter: "fw", Key: "k", Window: 1000}}, 1002*sec - now + sec + sharedTTLMargin},
		{"the newest window counts", []wire.Delta{{Limiter: "fw", Key: "k", Window: 999}, {Limiter: "sw", Key: "k", Window: 1000}},
			1002*sec - now + sec + sharedTTLMargin},
		{"stale window: a period and a minute", []wire.Delta{{Limiter: "fw", Key: "k", Window: 990}}, sec + sharedTTLMargin},
		{"token bucket", []wire.Delta{{Limiter: "fw", Key: "k", Window: 1000}, {Limiter: "tb", Key: "k"}}, int64(time.Hour)},
		{"no entries", nil, iso},
	} {
		if got := m.sharedMarkTTL(tc.entries, now, iso); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, time.Duration(got), time.Duration(tc.want))
		}
	}
	if got := m.sharedMarkTTL([]wire.Delta{{Limiter: "fw", Key: "k", Window: 1000}}, now, int64(time.Second)); got != sec {
		t.Errorf("capped: %v, want the isolate's TTL 1s", time.Duration(got))
	}
}
