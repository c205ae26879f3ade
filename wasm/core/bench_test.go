package core_test

import (
	"strconv"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/core"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// benchCfg has one limiter of each kind the entry layout distinguishes:
// approximate windows, a bucket and a strict (leased) window.
func benchCfg() wire.Config {
	return wire.Config{Version: wire.Version, IsolateID: "bench", Limiters: []wire.LimiterConfig{
		{Name: "fixed", Algorithm: wire.FixedWindow, Limit: 1 << 40, Period: 60 * sec},
		{Name: "sliding", Algorithm: wire.SlidingWindow, Limit: 1 << 40, Period: 60 * sec},
		{Name: "bucket", Algorithm: wire.TokenBucket, Limit: 1 << 40, Period: 60 * sec},
		{Name: "strict", Algorithm: wire.FixedWindow, Limit: 1 << 40, Period: 60 * sec, Mode: wire.Strict},
	}}
}

// benchKeys returns n distinct 32-byte keys.
func benchKeys(n int) [][]byte {
	ks := make([][]byte, n)
	for i := range ks {
		k := []byte("customer-00000000000000000000000")
		s := strconv.Itoa(i)
		copy(k[len(k)-len(s):], s)
		ks[i] = k
	}
	return ks
}

// BenchmarkDecideHotKey decides one key again and again, per limiter kind.
func BenchmarkDecideHotKey(b *testing.B) {
	for lim, name := range []string{"fixed", "sliding", "bucket", "strict"} {
		b.Run(name, func(b *testing.B) {
			c, err := core.New(benchCfg())
			if err != nil {
				b.Fatal(err)
			}
			key := benchKeys(1)[0]
			var r core.Result
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.Decide(lim, key, 1, sec+int64(i), &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecide100kKeys decides over 100,000 keys already in the table
// (the default key cap), so every lookup misses the CPU caches.
func BenchmarkDecide100kKeys(b *testing.B) {
	c, err := core.New(benchCfg())
	if err != nil {
		b.Fatal(err)
	}
	keys := benchKeys(100_000)
	var r core.Result
	for i, k := range keys {
		if err := c.Decide(0, k, 1, sec+int64(i), &r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Decide(0, keys[(i*7919)%len(keys)], 1, 2*sec+int64(i), &r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideNewKeys decides keys never seen before under a key cap of
// 10,000: each decision inserts an entry and evicts one.
func BenchmarkDecideNewKeys(b *testing.B) {
	cfg := benchCfg()
	cfg.MaxKeys = 10_000
	c, err := core.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	key := []byte("flood-0000000000000000000000000")
	var r core.Result
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := strconv.AppendInt(key[:6], int64(i), 10)
		if err := c.Decide(0, k, 1, sec+int64(i), &r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyncRound decides 64 keys of each limiter and runs one
// SyncOut/SyncIn round through the test coordinator (its encoding and
// bookkeeping included).
func BenchmarkSyncRound(b *testing.B) {
	cfg := benchCfg()
	c, err := core.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	fc := newFakeCoord(b, cfg)
	fc.lease = func(string, lkey, int64) int64 { return 1000 }
	keys := benchKeys(64)
	var r core.Result
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now := sec + int64(i)*1e6
		for lim := range cfg.Limiters {
			for _, k := range keys {
				if err := c.Decide(lim, k, 1, now, &r); err != nil {
					b.Fatal(err)
				}
			}
		}
		fc.sync(c, now)
	}
}
