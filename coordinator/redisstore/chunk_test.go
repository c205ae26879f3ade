package redisstore

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/redis/go-redis/v9"
)

// scriptCalls returns how many scripts the Redis at addr ran (EVALSHA and
// EVAL, from INFO commandstats).
func scriptCalls(t *testing.T, addr string) int {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				v, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				n += v
			}
		}
	}
	return n
}

// TestLargeCountGroupRunsAsSeveralScripts: a group of count writes for one
// master whose arguments pass maxScriptArgBytes (16 buckets of 1,000 keys
// over 3 masters, one isolate's add each) runs as several scripts per
// master in one pipeline, each within the bound, and every key is counted. Before, the group was one
// script however large: groups of maximal batches ran scripts of up to
// 0.9 s, during which Redis answered no other client.
func TestLargeCountGroupRunsAsSeveralScripts(t *testing.T) {
	cl, s := startCluster(t, 3, 16)
	ctx := context.Background()
	now := limitmath.Window(int64(1_800_000_000)*second, second) * second
	var ws []merge.CountWrite
	for b := 0; b < 16; b++ {
		w := merge.CountWrite{Bucket: b}
		part := merge.CountPart{Mark: merge.MarkSet{Isolate: "iso", Seq: 1, TTL: 60 * second}, Bit: 1}
		for j := 0; j < 1000; j++ {
			w.Keys = append(w.Keys, merge.CountKey{Key: keyIn(s, b, j), TTL: 60 * second, Epoch: now / second})
			part.Adds = append(part.Adds, merge.CountAdd{Key: j, Window: now / second, Delta: 1})
		}
		w.Parts = append(w.Parts, part)
		ws = append(ws, w)
	}
	calls, err := s.countCalls(ws)
	if err != nil {
		t.Fatal(err)
	}
	total, idx := 0, make([]int, len(calls))
	for i := range calls {
		total += argBytes(calls[i].args)
		idx[i] = i
	}
	chunks := scriptChunks(calls, idx)
	if total <= 2*maxScriptArgBytes || len(chunks) < 2 {
		t.Fatalf("%d bytes of arguments in %d chunks: the test needs a group past the bound", total, len(chunks))
	}
	for _, ch := range chunks {
		n := 0
		for _, i := range ch {
			n += argBytes(calls[i].args)
		}
		if n > maxScriptArgBytes && len(ch) > 1 {
			t.Errorf("a chunk of %d calls holds %d bytes, past %d", len(ch), n, maxScriptArgBytes)
		}
	}
	masters := cl.Masters(ctx)
	ran := 0
	for _, m := range masters {
		ran -= scriptCalls(t, m)
	}
	outs, err := s.AddCounts(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range masters {
		ran += scriptCalls(t, m)
	}
	// At least a script per bound's worth of arguments, and more than one
	// per master.
	if ran < total/maxScriptArgBytes || ran <= len(masters) {
		t.Errorf("the group ran as %d scripts on %d masters, want at least %d and more than %d (%d bytes of arguments)",
			ran, len(masters), total/maxScriptArgBytes, len(masters), total)
	}
	t.Logf("%d bytes of arguments ran as %d scripts on %d masters", total, ran, len(masters))
	for b, o := range outs {
		if o.Outcome != merge.SubApplied || len(o.Counters) != 1000 {
			t.Fatalf("bucket %d: outcome %v, %d counters", b, o.Outcome, len(o.Counters))
		}
		for j, c := range o.Counters {
			if c.Count != 1 {
				t.Fatalf("bucket %d key %d: count %d, want 1", b, j, c.Count)
			}
		}
	}
}
