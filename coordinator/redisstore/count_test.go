package redisstore

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/internal/proccpu"
	"github.com/edgelimit/edgelimit/internal/rediscluster"
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/redis/go-redis/v9"
)

// startCluster starts a Redis Cluster of masters (at least 3, no
// replicas) for a test, stopped at its end, and opens a store on it.
func startCluster(t testing.TB, masters, buckets int) (*rediscluster.Cluster, *Store) {
	t.Helper()
	if err := rediscluster.Available(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := rediscluster.Start(ctx, rediscluster.Options{Masters: masters})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	s, err := Open(ctx, Options{Addrs: cl.Addrs(), Buckets: buckets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return cl, s
}

const second = int64(time.Second)

// keyIn returns a storage key of limiter "c" in bucket b.
func keyIn(s *Store, b int, n int) []byte {
	for i := 0; ; i++ {
		k := []byte(merge.KeyStorageKey("c", "k"+strconv.Itoa(n)+"-"+strconv.Itoa(i)))
		if s.Bucket(k) == b {
			return k
		}
	}
}

// TestCountScriptMatchesRoll: the count script's window arithmetic is
// limitmath's. Random adds (windows around a moving base, some stale,
// some skipping windows) by random isolates go through AddCounts on a
// real cluster and through a model built on limitmath.Roll; after every
// write each key's record (window, counts, stale adds) must be the
// model's, and its sketch must hold exactly the bits of the isolates that
// added to it in its epoch (and the epoch before, rolled). Records carry
// the TTL given.
func TestCountScriptMatchesRoll(t *testing.T) {
	_, s := startCluster(t, 3, 4)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	type model struct {
		win, cnt, prev, epoch int64
		cur, last             [4]uint64
	}
	const nkeys = 6
	keys := make([][]byte, nkeys)
	for j := range keys {
		keys[j] = keyIn(s, 1, j)
	}
	models := make([]model, nkeys)
	seqs := map[string]int64{}
	base := int64(1000)
	for round := 0; round < 300; round++ {
		base += int64(rng.IntN(3)) // 0: same window, 1: the next, 2: one skipped
		now := base*second + second/2
		w := merge.CountWrite{Bucket: 1}
		for j := range keys {
			w.Keys = append(w.Keys, merge.CountKey{Key: keys[j], TTL: 60 * second, Epoch: limitmath.Window(now, second)})
		}
		var wantStale []int64
		for p := 0; p < 1+rng.IntN(3); p++ {
			iso := "iso" + strconv.Itoa(rng.IntN(5))
			if seqs[iso] >= int64(round+1) {
				continue // one part per isolate per write
			}
			seqs[iso] = int64(round + 1)
			part := merge.CountPart{Mark: merge.MarkSet{Isolate: iso, Seq: int64(round + 1), TTL: 60 * second}, Bit: rng.IntN(256)}
			var stale int64
			touched := map[int]bool{}
			for a := 0; a < 1+rng.IntN(4); a++ {
				j := rng.IntN(nkeys)
				win := base - int64(rng.IntN(4)) + int64(rng.IntN(2)) // base-3 .. base+1
				d := int64(rng.IntN(5))
				part.Adds = append(part.Adds, merge.CountAdd{Key: j, Window: win, Delta: d})
				m := &models[j]
				m.win, m.cnt, m.prev = limitmath.Roll(m.win, m.cnt, m.prev, win)
				switch win {
				case m.win:
					m.cnt += d
				case m.win - 1:
					m.prev += d
				case m.win - 2:
					// The record a window ahead of the coordinator's
					// clock (merge's applyDelta): counted a window late.
					if m.win > limitmath.Window(now, second) {
						m.prev += d
					} else {
						stale++
					}
				default:
					stale++
				}
				touched[j] = true
			}
			for j := range touched {
				m := &models[j]
				e := limitmath.Window(now, second)
				switch {
				case e == m.epoch+1:
					m.last, m.cur = m.cur, [4]uint64{}
				case e > m.epoch:
					m.last, m.cur = [4]uint64{}, [4]uint64{}
				}
				m.epoch = max(m.epoch, e)
				m.cur[part.Bit/64] |= 1 << (part.Bit % 64)
			}
			w.Parts = append(w.Parts, part)
			wantStale = append(wantStale, stale)
		}
		outs, err := s.AddCounts(ctx, []merge.CountWrite{w})
		if err != nil {
			t.Fatal(err)
		}
		o := outs[0]
		if o.Outcome != merge.SubApplied {
			t.Fatalf("round %d: outcome %v", round, o.Outcome)
		}
		for p := range w.Parts {
			if o.Dup[p] || o.Stale[p] != wantStale[p] {
				t.Fatalf("round %d part %d: dup %v stale %d, want false %d", round, p, o.Dup[p], o.Stale[p], wantStale[p])
			}
		}
		for j := range keys {
			m, c := models[j], o.Counters[j]
			if c.Win != m.win || c.Count != m.cnt || c.Prev != m.prev || c.Epoch != m.epoch || c.Cur != m.cur || c.Last != m.last {
				t.Fatalf("round %d key %d: store %+v, model %+v", round, j, c, m)
			}
		}
	}
	// Each record written has the TTL given.
	if ttl, err := s.Client().PTTL(ctx, s.RedisKey(keys[0])).Result(); err != nil || ttl > time.Minute || ttl < 50*time.Second {
		t.Fatalf("record TTL %v (%v), want the 60 s given", ttl, err)
	}
	// What ReadShared returns is what the script answered.
	vals, _, _, err := s.ReadShared(ctx, keys, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for j, v := range vals {
		if v.Counter == nil || v.Counter.Count != models[j].cnt || v.Counter.Win != models[j].win {
			t.Fatalf("ReadShared of key %d: %+v, model %+v", j, v.Counter, models[j])
		}
	}
}

// TestCountRetryNotDoubled: a CountWrite sent again (its reply lost) finds
// its parts' marks at their seq: nothing is added twice, the parts are
// answered as skipped, and the marks' TTLs are renewed. A later seq of the
// same isolate is added, and so is one whose mark holds garbage.
func TestCountRetryNotDoubled(t *testing.T) {
	_, s := startCluster(t, 3, 4)
	ctx := context.Background()
	k := keyIn(s, 2, 0)
	w := func(seq, delta int64) merge.CountWrite {
		return merge.CountWrite{Bucket: 2, Keys: []merge.CountKey{{Key: k, TTL: 60 * second, Epoch: 1000}},
			Parts: []merge.CountPart{{Mark: merge.MarkSet{Isolate: "a", Seq: seq, TTL: 30 * second}, Bit: 7,
				Adds: []merge.CountAdd{{Key: 0, Window: 1000, Delta: delta}}}}}
	}
	for i, c := range []struct {
		seq, delta, want int64
		dup              bool
	}{{1, 5, 5, false}, {1, 5, 5, true}, {1, 9, 5, true}, {2, 3, 8, false}, {1, 5, 8, true}} {
		outs, err := s.AddCounts(ctx, []merge.CountWrite{w(c.seq, c.delta)})
		if err != nil {
			t.Fatal(err)
		}
		if o := outs[0]; o.Outcome != merge.SubApplied || o.Dup[0] != c.dup || o.Counters[0].Count != c.want {
			t.Fatalf("write %d (seq %d): %+v, want dup %v count %d", i, c.seq, o, c.dup, c.want)
		}
	}
	mark := s.Tag(2) + "na"
	if err := s.Client().PExpire(ctx, mark, time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddCounts(ctx, []merge.CountWrite{w(2, 3)}); err != nil {
		t.Fatal(err)
	}
	if ttl, err := s.Client().PTTL(ctx, mark).Result(); err != nil || ttl < 20*time.Second {
		t.Fatalf("mark TTL after a skipped retry: %v %v, want renewed to 30 s", ttl, err)
	}
	// A mark that is not a number (written by something else) is none:
	// the write is applied, not failed half-way.
	if err := s.Client().Set(ctx, mark, "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	outs, err := s.AddCounts(ctx, []merge.CountWrite{w(3, 1)})
	if err != nil || outs[0].Dup[0] || outs[0].Counters[0].Count != 9 {
		t.Fatalf("write over a garbage mark: %+v %v, want applied, count 9", outs, err)
	}
}

// TestCountCrossSlotAllOrNothing: the count script of one master reads
// every key before it writes any, so a call that names a key its node
// does not serve (a slot moved) writes nothing, and the store then finds
// the right master for each bucket.
func TestCountCrossSlotAllOrNothing(t *testing.T) {
	_, s := startCluster(t, 3, 16)
	ctx := context.Background()
	masterOf := func(b int) string {
		n, err := s.masterFor(ctx, s.Tag(b))
		if err != nil {
			t.Fatal(err)
		}
		return n.Options().Addr
	}
	// Two buckets on different masters.
	b1, b2 := 0, -1
	for b := 1; b < 16 && b2 < 0; b++ {
		if masterOf(b) != masterOf(b1) {
			b2 = b
		}
	}
	if b2 < 0 {
		t.Fatal("every bucket on one master")
	}
	k1, k2 := keyIn(s, b1, 0), keyIn(s, b2, 0)
	cw := func(b int, k []byte) merge.CountWrite {
		return merge.CountWrite{Bucket: b, Keys: []merge.CountKey{{Key: k, TTL: 60 * second, Epoch: 1000}},
			Parts: []merge.CountPart{{Mark: merge.MarkSet{Isolate: "a", Seq: 1, TTL: 30 * second}, Bit: 1,
				Adds: []merge.CountAdd{{Key: 0, Window: 1000, Delta: 1}}}}}
	}
	// One call of both buckets, sent to b1's master by hand.
	calls := []scriptCall{s.countCall(t, cw(b1, k1)), s.countCall(t, cw(b2, k2))}
	c, _ := combineCounts(calls, []int{0, 1})
	node, err := s.masterFor(ctx, s.Tag(b1))
	if err != nil {
		t.Fatal(err)
	}
	res, ran := []any{nil}, []bool{false}
	err = s.evalGroup(ctx, node, []scriptCall{c}, []int{0}, res, ran, time.Now().Add(time.Second))
	if err == nil || ran[0] {
		t.Fatalf("a call naming another master's key: ran %v, err %v; want refused", ran[0], err)
	}
	if !retryable(err) {
		t.Errorf("error %v is not retried (the slot map reloaded)", err)
	}
	if n, err := s.Client().Exists(ctx, s.RedisKey(k1), s.Tag(b1)+"na").Result(); err != nil || n != 0 {
		t.Fatalf("the refused call wrote %d keys in the bucket it serves (%v)", n, err)
	}
	// Through AddCounts: each bucket on its master.
	outs, err := s.AddCounts(ctx, []merge.CountWrite{cw(b1, k1), cw(b2, k2)})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		if o.Outcome != merge.SubApplied || o.Counters[0].Count != 1 {
			t.Fatalf("write %d: %+v", i, o)
		}
	}
}

// TestCountManyKeys: a bucket part naming more keys than the script reads
// with one MGET (it reads them in chunks) is counted in full: every key's
// record holds each add, retried or not, and the marks of many isolates
// are read with them.
func TestCountManyKeys(t *testing.T) {
	_, s := startCluster(t, 3, 4)
	ctx := context.Background()
	const nkeys, nparts = 1100, 40
	w := merge.CountWrite{Bucket: 3}
	for j := 0; j < nkeys; j++ {
		w.Keys = append(w.Keys, merge.CountKey{Key: keyIn(s, 3, j), TTL: 60 * second, Epoch: 1000})
	}
	write := func(seq int64) []merge.CountOutcome {
		w.Parts = w.Parts[:0]
		for p := 0; p < nparts; p++ {
			part := merge.CountPart{Mark: merge.MarkSet{Isolate: "iso" + strconv.Itoa(p), Seq: seq, TTL: 30 * second}, Bit: p}
			for j := p; j < nkeys; j += nparts {
				part.Adds = append(part.Adds, merge.CountAdd{Key: j, Window: 1000, Delta: int64(1 + j%3)})
			}
			w.Parts = append(w.Parts, part)
		}
		outs, err := s.AddCounts(ctx, []merge.CountWrite{w})
		if err != nil {
			t.Fatal(err)
		}
		return outs
	}
	for i, c := range []struct {
		seq  int64
		dup  bool
		mult int64
	}{{1, false, 1}, {1, true, 1}, {2, false, 2}} {
		o := write(c.seq)[0]
		if o.Outcome != merge.SubApplied || len(o.Counters) != nkeys || len(o.Dup) != nparts {
			t.Fatalf("write %d: outcome %v, %d counters, %d parts", i, o.Outcome, len(o.Counters), len(o.Dup))
		}
		for p := 0; p < nparts; p++ {
			if o.Dup[p] != c.dup {
				t.Fatalf("write %d part %d: dup %v, want %v", i, p, o.Dup[p], c.dup)
			}
		}
		for j, ctr := range o.Counters {
			bit := j % nparts
			if want := c.mult * int64(1+j%3); ctr.Win != 1000 || ctr.Count != want || ctr.Cur[bit/64]&(1<<(bit%64)) == 0 {
				t.Fatalf("write %d key %d: %+v, want count %d and bit %d", i, j, ctr, want, bit)
			}
		}
	}
}

// countCall returns the scriptCall (segment) AddCounts makes of w.
func (s *Store) countCall(t testing.TB, w merge.CountWrite) scriptCall {
	t.Helper()
	calls, err := s.countCalls([]merge.CountWrite{w})
	if err != nil {
		t.Fatal(err)
	}
	return calls[0]
}

// BenchmarkIncrBy is the floor any Redis write path has on the machine:
// the masters' CPU per delta (redis-µs/delta, /proc) when each delta is
// one pipelined INCRBY on its key (100,000 keys over 3 masters, 6,400 per
// pipeline round), with no marks, no TTL and no view.
func BenchmarkIncrBy(b *testing.B) {
	cl, s := startCluster(b, 3, 64)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	cpu := func() time.Duration { return mastersCPU(b, cl) }
	var deltas int64
	b.ResetTimer()
	before := cpu()
	for i := 0; i < b.N; i++ {
		_, err := s.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
			for e := 0; e < 6400; e++ {
				p.IncrBy(ctx, s.RedisKey([]byte(merge.KeyStorageKey("c", "key-"+strconv.Itoa(rng.IntN(100000))))), 1)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		deltas += 6400
	}
	b.ReportMetric(float64((cpu()-before).Microseconds())/float64(deltas), "redis-µs/delta")
}

// BenchmarkCountScript measures the Redis side of the counting path: a
// cluster of 3 masters (no replicas) takes CountWrites shaped as a saturated coordinator's
// group (64 isolates, 100 deltas each over 100,000 keys, 64 buckets:
// about 100 deltas and 52 parts per bucket) or as a 10,000 deltas/s one's
// (one batch per group). It reports the master's CPU (user + system,
// /proc) per delta: redis-µs/delta.
func BenchmarkCountScript(b *testing.B) {
	for _, bc := range []struct {
		name     string
		isolates int
	}{{"group64", 64}, {"group1", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			cl, s := startCluster(b, 3, 64)
			cpu := func() time.Duration { return mastersCPU(b, cl) }
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(3, 4))
			now := time.Now().UnixNano()
			seq := int64(0)
			var deltas int64
			b.ResetTimer()
			before := cpu()
			for i := 0; i < b.N; i++ {
				seq++
				byBucket := map[int]*merge.CountWrite{}
				var ws []merge.CountWrite
				idx := map[int]map[string]int{}
				for iso := 0; iso < bc.isolates; iso++ {
					parts := map[int]*merge.CountPart{}
					for e := 0; e < 100; e++ {
						k := []byte(merge.KeyStorageKey("c", "key-"+strconv.Itoa(rng.IntN(100000))))
						bk := s.Bucket(k)
						w := byBucket[bk]
						if w == nil {
							w = &merge.CountWrite{Bucket: bk}
							byBucket[bk] = w
							idx[bk] = map[string]int{}
						}
						j, ok := idx[bk][string(k)]
						if !ok {
							j = len(w.Keys)
							idx[bk][string(k)] = j
							w.Keys = append(w.Keys, merge.CountKey{Key: k, TTL: 60 * second, Epoch: limitmath.Window(now, second)})
						}
						p := parts[bk]
						if p == nil {
							p = &merge.CountPart{Mark: merge.MarkSet{Isolate: "iso" + strconv.Itoa(iso), Seq: seq, TTL: 60 * second}, Bit: iso}
							parts[bk] = p
						}
						p.Adds = append(p.Adds, merge.CountAdd{Key: j, Window: limitmath.Window(now, second), Delta: 1})
						deltas++
					}
					for bk, p := range parts {
						byBucket[bk].Parts = append(byBucket[bk].Parts, *p)
					}
				}
				for _, w := range byBucket {
					ws = append(ws, *w)
				}
				if _, err := s.AddCounts(ctx, ws); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpu()-before).Microseconds())/float64(deltas), "redis-µs/delta")
		})
	}
}

// mastersCPU returns the CPU time (user + system) the cluster's masters
// have used.
func mastersCPU(b *testing.B, cl *rediscluster.Cluster) time.Duration {
	b.Helper()
	var d time.Duration
	for _, a := range cl.Addrs() {
		c, err := proccpu.Of(cl.Pid(a))
		if err != nil {
			b.Fatal(err)
		}
		d += c
	}
	return d
}
