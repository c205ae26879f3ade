package coordinator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/redisstore"
	"github.com/edgelimit/edgelimit/internal/rediscluster"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Leases granted to amendments through a master's failover (Redis
// Cluster, --redis-wait 1, 2 replicas per master): a lease told to an
// isolate must survive the failure of the master that holds its key, or
// the promoted replica grants the same budget to another isolate.

// failoverIso is one isolate of TestRedisAmendmentFailover: its last
// batch and what the coordinators told it.
type failoverIso struct {
	id       string
	rng      *rand.Rand
	seq      int64 // its last batch
	lease    int64 // the largest lease of the hot key told for batch seq: what it may admit from its cut on
	admitted int64 // admitted on the hot key and sent in acknowledged batches
}

// syncAny sends b to one of cs at random until one answers (as an isolate
// resends a batch that failed), at most until deadline, and returns the
// reply and the attempts that failed.
func syncAny(cs []*Coordinator, rng *rand.Rand, b *wire.Batch, deadline time.Time) (*wire.Reply, int, error) {
	for failed := 0; ; failed++ {
		rp, err := cs[rng.IntN(len(cs))].Sync(context.Background(), b)
		if err == nil {
			return rp, failed, nil
		}
		if time.Now().After(deadline) {
			return nil, failed, fmt.Errorf("%s/%d: no coordinator answered: %w", b.Isolate, b.Seq, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hotLease is the lease of sfw/hot rp tells (0 without a view).
func hotLease(rp *wire.Reply) int64 {
	v, _ := coordtest.FindView(rp, "sfw", "hot")
	return v.Lease
}

// TestRedisAmendmentFailover: 6 isolates take leases of one strict key
// (sfw/hot, 100 per window; the clock stands still, so one window) through
// batches and amendments sent to two coordinators at random (--redis-wait
// 1, refusal; 3 masters with 2 replicas each), while the master holding
// the key fails:
//
//  1. three rounds: a batch reporting what the isolate admitted within its
//     lease, and its amendment asking 6 for hot and 3 for another key on
//     another master (cold), in the orders of
//     TestRedisAmendmentsTwoCoordinatorsExact (batch first, amendment
//     first, amendment resent);
//  2. every isolate's next batch is acknowledged; then hot's master's
//     replicas fall behind (SIGSTOP and CLIENT KILL TYPE replica) and
//     each isolate sends that batch's amendment, asking 5 more than its
//     lease, and resends it when it fails, as the module does: the first
//     attempt's grant reaches the master only (WAIT is not met: 503), and
//     the resend finds it there, the ask covered. Between two attempts of
//     the amendment comes one of the batch itself, without asks (an
//     attempt sent before the amendment and delivered after it): a
//     duplicate that reads the grant too. Once every isolate has sent the
//     amendment, the batch and the amendment again (or been answered),
//     the master is killed (SIGKILL), its replicas resume, one is
//     promoted, and the isolates' resends are answered by it;
//  3. then every lease told is read back: the store must reserve each
//     isolate at least the lease its replies told (a lease told from a
//     grant only the dead master had is one the promoted replica forgot),
//     the count plus the leases told must fit the limit, and the count
//     must be what the isolates admitted (no acknowledged delta lost). A
//     seventh isolate then asks for the whole limit: it must get only what
//     no other isolate was told;
//  4. three more rounds with asks of 40, more than is free, so the budget
//     is contended, and the same checks on the last leases.
//
// It fails when a duplicate that tells a lease is answered without a
// write (merge/sharedconfirm.go; the grant it tells is then only on the
// dead master): the 6 batches resent during the lag were answered with
// leases of 10 that the promoted replica held at 5, and the window went to
// 18 counted + 112 told against a limit of 100. Before that rule, it
// failed the same way when a part with asks found covered was answered
// without a write (the amendment resent).
func TestRedisAmendmentFailover(t *testing.T) {
	ctx, cl := startReplicatedCluster(t, rediscluster.Options{Masters: 3, ReplicasPerMaster: 2, NodeTimeout: time.Second})
	clk, w := windowStart()
	var cs []*Coordinator
	var rs *redisstore.Store
	for range 2 {
		s, err := redisstore.Open(ctx, redisstore.Options{Addrs: cl.Addrs(), Wait: 1, Buckets: 32, RetryFor: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		rs = s
		cs = append(cs, openShared(t, s, clk))
	}
	master := masterOf(ctx, t, rs, []byte(merge.KeyStorageKey("sfw", "hot")))
	cold := keyOffMaster(ctx, t, rs, master, "cold-")
	replicas := cl.ReplicasOf(ctx, master)
	if len(replicas) != 2 {
		t.Fatalf("master %s has replicas %v, want 2", master, replicas)
	}
	const limit = 100
	isos := make([]*failoverIso, 6)
	for i := range isos {
		isos[i] = &failoverIso{id: fmt.Sprintf("iso%d", i), rng: rand.New(rand.NewPCG(uint64(i), 23))}
	}
	deadline := time.Now().Add(45 * time.Second)
	// next returns p's next batch: what it admitted within its lease (at
	// most maxUse), reported on hot.
	next := func(p *failoverIso, maxUse int64) (*wire.Batch, int64) {
		p.seq++
		use := min(p.lease, maxUse)
		return batch(p.id, p.seq, clk.now(), wire.Delta{Limiter: "sfw", Key: "hot", Window: w, Delta: use, Demand: use + 1}), use
	}
	asks := func(hot int64) []wire.Ask {
		return []wire.Ask{{Limiter: "sfw", Key: "hot", Window: w, Cost: hot}, {Limiter: "sfw", Key: cold, Window: w, Cost: 3}}
	}
	// rounds runs n rounds of every isolate at once: a batch and its
	// amendment asking ask for hot, in a random order.
	rounds := func(n int, ask, maxUse int64) {
		var wg sync.WaitGroup
		for _, p := range isos {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					b, use := next(p, maxUse)
					am := coordtest.Amend(b, asks(ask)...)
					sends := [][]*wire.Batch{{b, am}, {am, b}, {b, am, am}}[p.rng.IntN(3)]
					p.lease = 0
					for _, s := range sends {
						rp, _, err := syncAny(cs, p.rng, s, deadline)
						if err != nil {
							t.Error(err)
							return
						}
						p.lease = max(p.lease, hotLease(rp)) // every reply's lease is from the batch's cut on
					}
					p.admitted += use
				}
			}()
		}
		wg.Wait()
	}
	// check reads hot back from both coordinators: each isolate of ps
	// keeps at least the lease it was told, the count plus the leases told
	// fit the limit, and the count is what was admitted.
	check := func(when string, ps []*failoverIso) {
		t.Helper()
		var told, admitted int64
		for _, p := range ps {
			told += p.lease
			admitted += p.admitted
		}
		for ci, c := range cs {
			ks := getKey(t, c, "sfw", "hot")
			for _, p := range ps {
				if got := ks.Leases[p.id]; got < p.lease {
					t.Errorf("%s, coordinator %d: %s was told a lease of %d for batch %d, the store reserves it %d: a lease told was forgotten",
						when, ci, p.id, p.lease, p.seq, got)
				}
			}
			if ks.Count+told > limit {
				t.Errorf("%s, coordinator %d: hot counted %d + leases told %d > limit %d", when, ci, ks.Count, told, limit)
			}
			if ks.Count != admitted {
				t.Errorf("%s, coordinator %d: hot counted %d, the isolates admitted %d", when, ci, ks.Count, admitted)
			}
			if ks.Count+ks.LeaseSum > limit {
				t.Errorf("%s, coordinator %d: hot counted %d + reserved %d > limit %d", when, ci, ks.Count, ks.LeaseSum, limit)
			}
			if ci == 0 {
				t.Logf("%s: hot counted %d (admitted %d), leases told %d, reserved %d", when, ks.Count, admitted, told, ks.LeaseSum)
			}
		}
	}

	// 1. Before the failure.
	rounds(3, 6, 1)
	if t.Failed() {
		return
	}
	check("before the failure", isos)

	// 2. Each isolate's next batch, acknowledged; then the replicas of
	// hot's master fall behind and the amendments are sent.
	bs, ams := make([]*wire.Batch, len(isos)), make([]*wire.Batch, len(isos))
	var wg sync.WaitGroup
	for i, p := range isos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, use := next(p, 1)
			rp, _, err := syncAny(cs, p.rng, b, deadline)
			if err != nil {
				t.Error(err)
				return
			}
			p.lease, p.admitted = hotLease(rp), p.admitted+use
			bs[i], ams[i] = b, coordtest.Amend(b, asks(p.lease+5)...)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	resume := freezeReplicas(ctx, t, cl, master, replicas)
	defer resume()
	lagStart := time.Now()
	attempts := make([]atomic.Int64, len(isos))
	answered := make([]atomic.Int64, len(isos)) // when the amendment was answered (UnixNano)
	for i, p := range isos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				send := ams[i] // the amendment, then the batch, and so on
				if attempts[i].Load()%2 == 1 {
					send = bs[i]
				}
				rp, err := cs[p.rng.IntN(2)].Sync(context.Background(), send)
				attempts[i].Add(1)
				if err == nil {
					p.lease = max(p.lease, hotLease(rp)) // the batch's reply tells the lease from its cut on too
					answered[i].Store(time.Now().UnixNano())
					return
				}
				if time.Now().After(deadline) {
					t.Errorf("%s: amendment never answered: %v", p.id, err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	// Kill the master once every isolate has sent its amendment, the
	// batch and the amendment again, or was answered.
	for waitUntil := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		all := true
		for i := range isos {
			all = all && (attempts[i].Load() >= 3 || answered[i].Load() != 0)
		}
		if all {
			break
		}
		if time.Now().After(waitUntil) {
			t.Errorf("the isolates did not send 3 attempts within 20 s of the lag")
			break
		}
	}
	killed := time.Now()
	promoted := killAndPromote(ctx, t, cl, master, replicas, resume)
	promotedAt := time.Now()
	wg.Wait()
	var inLag, lagAttempts int64
	for i := range isos {
		lagAttempts += attempts[i].Load()
		if a := answered[i].Load(); a != 0 && a < killed.UnixNano() {
			inLag++
		}
	}
	t.Logf("replicas of %s behind for %.2f s: %d attempts (amendments and their batches), %d answered before the kill; %s promoted %.2f s after the kill",
		master, killed.Sub(lagStart).Seconds(), lagAttempts, inLag, promoted, promotedAt.Sub(killed).Seconds())
	if t.Failed() {
		return
	}

	// 3. Every lease told is still reserved; a newcomer gets only the rest.
	check("after the failover", isos)
	grab := &failoverIso{id: "grab", rng: rand.New(rand.NewPCG(99, 23))}
	gb, _ := next(grab, 0)
	rp, _, err := syncAny(cs, grab.rng, coordtest.Amend(gb, wire.Ask{Limiter: "sfw", Key: "hot", Window: w, Cost: limit}), deadline)
	if err != nil {
		t.Fatal(err)
	}
	grab.lease = hotLease(rp)
	all := append(isos[:len(isos):len(isos)], grab)
	check("after a newcomer asked for the whole limit", all)

	// 4. Contended rounds after the failover.
	rounds(3, 40, 4)
	if t.Failed() {
		return
	}
	check("at the end", all)
	for _, c := range cs {
		if ks := getKey(t, c, "sfw", cold); ks.Count+ks.LeaseSum > limit {
			t.Errorf("%s: count %d + leases %d > limit %d", cold, ks.Count, ks.LeaseSum, limit)
		}
	}
	var admitted, told int64
	for _, p := range all {
		admitted, told = admitted+p.admitted, told+p.lease
	}
	var granted int64
	for _, c := range cs {
		granted += c.mergeStats().AsksGranted
	}
	t.Logf("admitted %d on hot, %d told at the end (the newcomer %d), %d units granted to asks", admitted, told, grab.lease, granted)
	if granted == 0 || admitted == 0 {
		t.Fatalf("granted %d, admitted %d: the test exercised nothing", granted, admitted)
	}
}

// TestRedisDuplicateConfirmsLease: a duplicate that tells a lease confirms
// it first. An isolate's batch is acknowledged (lease L of sfw/hot); then
// hot's master's replicas fall behind (SIGSTOP, CLIENT KILL TYPE replica)
// and its amendment asks L+10: the grant reaches the master only (503).
// Another attempt of the same batch then arrives without that ask: the
// batch itself (an attempt sent before the amendment, delivered after it),
// or a later amendment asking only for another key (on another master: the
// module's next amendment asks only for the keys held since the last). It
// is a duplicate in hot's bucket, and its reply tells hot's lease as read:
// L+10, the unconfirmed grant. It must be answered only once WAIT has
// confirmed it (503 while the replicas are behind). The master is then
// killed and a replica promoted; the store must still reserve the isolate
// the lease it was told, and a newcomer asking for the whole limit gets
// only the rest.
func TestRedisDuplicateConfirmsLease(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resend func(b1 *wire.Batch, other string) *wire.Batch
	}{
		{"batch", func(b1 *wire.Batch, _ string) *wire.Batch { return b1 }},
		{"amendment-of-another-key", func(b1 *wire.Batch, other string) *wire.Batch {
			return coordtest.Amend(b1, wire.Ask{Limiter: "sfw", Key: other, Window: b1.Entries[0].Window, Cost: 2})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cl, rs, c, clk := waitingCluster(t)
			w := clk.now() / sec
			master := masterOf(ctx, t, rs, []byte(merge.KeyStorageKey("sfw", "hot")))
			other := keyOffMaster(ctx, t, rs, master, "other-")
			replicas := cl.ReplicasOf(ctx, master)
			b1 := batch("a", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "hot", Window: w, Delta: 0, Demand: 1})
			told := hotLease(mustSync(t, c, b1))
			resume := freezeReplicas(ctx, t, cl, master, replicas)
			defer resume()
			if rp, err := c.Sync(ctx, coordtest.Amend(b1, wire.Ask{Limiter: "sfw", Key: "hot", Window: w, Cost: told + 10})); err == nil {
				t.Fatalf("amendment answered (lease %d) with its master's replicas behind, want an error", hotLease(rp))
			}
			if rp, err := c.Sync(ctx, tc.resend(b1, other)); err == nil {
				told = max(told, hotLease(rp))
				t.Errorf("with the replicas behind, the duplicate was answered: lease %d told, written on the master only", hotLease(rp))
			}
			killAndPromote(ctx, t, cl, master, replicas, resume)
			// The newcomer asks for the whole limit.
			nb := batch("n", 1, clk.now(), wire.Delta{Limiter: "sfw", Key: "hot", Window: w, Demand: 1})
			rp, _, err := syncAny([]*Coordinator{c}, rand.New(rand.NewPCG(1, 2)), coordtest.Amend(nb, wire.Ask{Limiter: "sfw", Key: "hot", Window: w, Cost: 100}), time.Now().Add(20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			newcomer := hotLease(rp)
			ks := getKey(t, c, "sfw", "hot")
			if ks.Leases["a"] < told {
				t.Errorf("a was told a lease of %d, the promoted replica reserves it %d", told, ks.Leases["a"])
			}
			if ks.Count+told+newcomer > 100 {
				t.Errorf("count %d + lease told to a %d + to the newcomer %d > limit 100", ks.Count, told, newcomer)
			}
			t.Logf("a told %d, reserved %d after the failover; the newcomer granted %d", told, ks.Leases["a"], newcomer)
		})
	}
}

// freezeReplicas stops master's replicas (SIGSTOP) and cuts them off, so
// that writes to master stay unconfirmed (WAIT is not met); the returned
// func resumes them (once; safe to call again).
func freezeReplicas(ctx context.Context, t *testing.T, cl *rediscluster.Cluster, master string, replicas []string) (resume func()) {
	t.Helper()
	for _, r := range replicas {
		if err := cl.Signal(r, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	stopped := true
	resume = func() {
		if stopped {
			stopped = false
			for _, r := range replicas {
				cl.Signal(r, syscall.SIGCONT)
			}
		}
	}
	if err := cl.DisconnectReplicas(ctx, master); err != nil {
		resume()
		t.Fatal(err)
	}
	return resume
}

// keyOffMaster returns the first key prefix0, prefix1, ... of limiter sfw
// whose record lives on another master than master.
func keyOffMaster(ctx context.Context, t *testing.T, rs *redisstore.Store, master, prefix string) string {
	t.Helper()
	for i := 0; ; i++ {
		if k := fmt.Sprintf("%s%d", prefix, i); masterOf(ctx, t, rs, []byte(merge.KeyStorageKey("sfw", k))) != master {
			return k
		}
	}
}

// killAndPromote kills master (SIGKILL), resumes its frozen replicas and
// waits (at most 30 s) until one of them is promoted, which it returns.
func killAndPromote(ctx context.Context, t *testing.T, cl *rediscluster.Cluster, master string, replicas []string, resume func()) string {
	t.Helper()
	if err := cl.Kill(master); err != nil {
		t.Fatal(err)
	}
	resume()
	for waitUntil := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for _, r := range replicas {
			if cl.IsMaster(ctx, r) {
				return r
			}
		}
		if time.Now().After(waitUntil) {
			t.Fatalf("no replica of %s promoted within 30 s", master)
		}
	}
}

// waitingCluster starts 3 masters with 2 replicas each (1 s node timeout)
// and a coordinator on them with --redis-wait 1 (retries bounded to 1 s),
// its clock standing at the start of a window.
func waitingCluster(t *testing.T) (context.Context, *rediscluster.Cluster, *redisstore.Store, *Coordinator, *fakeClock) {
	t.Helper()
	ctx, cl := startReplicatedCluster(t, rediscluster.Options{Masters: 3, ReplicasPerMaster: 2, NodeTimeout: time.Second})
	clk, _ := windowStart()
	rs, err := redisstore.Open(ctx, redisstore.Options{Addrs: cl.Addrs(), Wait: 1, Buckets: 32, RetryFor: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, cl, rs, openShared(t, rs, clk), clk
}
