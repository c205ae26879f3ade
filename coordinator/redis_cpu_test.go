package coordinator

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/internal/loadgen"
	"github.com/edgelimit/edgelimit/internal/proccpu"
	"github.com/edgelimit/edgelimit/internal/rediscluster"
	"github.com/redis/go-redis/v9"
)

// TestRedisCPUPerDelta measures the CPU (user + system, /proc) each tier
// spends per million key-deltas: a coordinator process on Pebble, and a
// coordinator process over a Redis Cluster of 3 masters + 3 replicas
// (appendfsync everysec, 64 buckets, as `edgelimit bench -run ingest`),
// with its masters and replicas counted apart. 64 loopback clients post
// batches of 100 deltas over 100,000 keys, as fast as answered and at
// 10,000 key-deltas/s; each phase 1 s of warm-up, then 4 s measured. It
// logs the table and the sizing it implies for 1,000,000 key-deltas/s at
// 70% CPU, which docs/scale-out.md quotes. A measurement (run with
// EDGELIMIT_REDIS_CPU=1; about 60 s): every process shares this machine's
// cores with the load generator, so saturating figures are what the
// machine allows, not what each tier could do alone.
func TestRedisCPUPerDelta(t *testing.T) {
	if os.Getenv("EDGELIMIT_REDIS_CPU") == "" {
		t.Skip("a measurement: set EDGELIMIT_REDIS_CPU=1 to run it")
	}
	if err := rediscluster.Available(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := rediscluster.Start(ctx, rediscluster.Options{Masters: 3, ReplicasPerMaster: 1, AppendFsync: "everysec"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	pebbleAddr, redisAddr := freeAddr(t), freeAddr(t)
	pebble, _ := startProcess(t, bin, "--data", t.TempDir(), "--listen", pebbleAddr)
	redisCoord, _ := startProcess(t, bin, "--store", "redis://"+strings.Join(cl.Addrs(), ","), "--redis-buckets", "64", "--listen", redisAddr)
	masters := cl.Masters(ctx)
	isMaster := map[string]bool{}
	for _, m := range masters {
		isMaster[m] = true
	}
	cpu := func(pid int) time.Duration {
		d, err := proccpu.Of(pid)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	type sample struct{ coord, masters, replicas time.Duration }
	snap := func(coordPid int) sample {
		s := sample{coord: cpu(coordPid)}
		for _, a := range cl.Addrs() {
			if isMaster[a] {
				s.masters += cpu(cl.Pid(a))
			} else {
				s.replicas += cpu(cl.Pid(a))
			}
		}
		return s
	}
	perM := func(d time.Duration, deltas int64) float64 { return d.Seconds() / float64(deltas) * 1e6 }

	var b strings.Builder
	fmt.Fprintf(&b, "| store | load | key-deltas/s | coordinator CPU s per 1M | masters | replicas | Redis tier (all) |\n|---|---|---|---|---|---|---|\n")
	type row struct{ coord, masters, replicas float64 }
	rows := map[string]row{}
	for _, ph := range []struct {
		store string
		addr  string
		pid   int
		rate  float64 // syncs/s; 0: as fast as answered
	}{
		{"pebble", pebbleAddr, pebble.Process.Pid, 0}, {"pebble", pebbleAddr, pebble.Process.Pid, 100},
		{"redis", redisAddr, redisCoord.Process.Pid, 0}, {"redis", redisAddr, redisCoord.Process.Pid, 100},
	} {
		cfg := loadgen.Config{URL: "http://" + ph.addr, Clients: 64, Entries: 100, Keys: 100000, Rate: ph.rate}
		cfg.Duration = time.Second
		if _, err := loadgen.Run(ctx, cfg); err != nil { // warm-up
			t.Fatal(err)
		}
		if ph.store == "redis" {
			resetCommandStats(t, masters)
		}
		before := snap(ph.pid)
		cfg.Duration = 4 * time.Second
		res, err := loadgen.Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		after := snap(ph.pid)
		if res.KeyDeltas == 0 {
			t.Fatalf("%s: nothing acknowledged (%s)", ph.store, res)
		}
		load := "as fast as answered"
		if ph.rate > 0 {
			load = fmt.Sprintf("%.0f key-deltas/s", ph.rate*100)
			if got := res.KeyDeltasPerSec(); got < 0.9*ph.rate*100 {
				// Another process held the cores or the disk (an AOF fsync
				// slower than 2 s blocks Redis's writes): the row's
				// figures are not those of this load.
				t.Logf("WARNING: %s at %s: only %.0f key-deltas/s were taken; do not compare this run", ph.store, load, got)
			}
		}
		r := row{coord: perM(after.coord-before.coord, res.KeyDeltas)}
		tier := "-"
		if ph.store == "redis" {
			r.masters = perM(after.masters-before.masters, res.KeyDeltas)
			r.replicas = perM(after.replicas-before.replicas, res.KeyDeltas)
			tier = fmt.Sprintf("%.1f", r.coord+r.masters+r.replicas)
		}
		rows[ph.store+load] = r
		if ph.store == "redis" {
			t.Logf("%s: masters' busiest commands (INFO commandstats) per million key-deltas: %s", load, commandStats(t, masters, res.KeyDeltas))
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.1f | %.1f | %.1f | %s |\n", ph.store, load, res.KeyDeltasPerSec(), r.coord, r.masters, r.replicas, tier)
	}
	t.Log("CPU per million key-deltas (utime+stime, seconds):\n" + b.String())
	// What the processes spend with no load (timers, the cluster bus,
	// expiring records, the store's health probes), per second, once the
	// load stopped: it weighs on the low-rate rows.
	idle0 := snap(redisCoord.Process.Pid)
	pidle0 := cpu(pebble.Process.Pid)
	time.Sleep(2 * time.Second)
	idle1 := snap(redisCoord.Process.Pid)
	pidle := (cpu(pebble.Process.Pid) - pidle0) / 2
	t.Logf("idle CPU per second: Pebble coordinator %v, Redis coordinator %v, masters %v, replicas %v (at 10,000 key-deltas/s, 1 ms per second is 0.1 s per million)",
		pidle, (idle1.coord-idle0.coord)/2, (idle1.masters-idle0.masters)/2, (idle1.replicas-idle0.replicas)/2)
	// Sizing for 1M key-deltas/s at 70% CPU: one core-second per second
	// per s/M of CPU; a Redis process uses one core.
	for _, load := range []string{"as fast as answered", "10000 key-deltas/s"} {
		p, r := rows["pebble"+load], rows["redis"+load]
		t.Logf("%s: for 1,000,000 key-deltas/s at 70%% CPU: %.0f coordinator cores over Redis (%.0f on Pebble), %.0f masters (a core each), %.0f cores of replicas per replica set (one replica per master); Redis tier / Pebble CPU per delta %.1fx",
			load, r.coord/0.7, p.coord/0.7, r.masters/0.7, r.replicas/0.7, (r.coord+r.masters+r.replicas)/p.coord)
	}
}

// resetCommandStats zeroes the command statistics of the masters.
func resetCommandStats(t *testing.T, masters []string) {
	t.Helper()
	for _, a := range masters {
		c := redis.NewClient(&redis.Options{Addr: a})
		err := c.ConfigResetStat(context.Background()).Err()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// commandStats sums the masters' INFO commandstats since the last
// resetCommandStats and describes the busiest commands: calls and
// seconds of Redis time per million of deltas.
func commandStats(t *testing.T, masters []string, deltas int64) string {
	t.Helper()
	type stat struct {
		calls int64
		usec  float64
	}
	sum := map[string]*stat{}
	for _, a := range masters {
		c := redis.NewClient(&redis.Options{Addr: a})
		info, err := c.Info(context.Background(), "commandstats").Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			// cmdstat_evalsha:calls=10,usec=200,usec_per_call=20.00,...
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			st := sum[name[len("cmdstat_"):]]
			if st == nil {
				st = &stat{}
				sum[name[len("cmdstat_"):]] = st
			}
			for _, f := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "calls":
					n, _ := strconv.ParseInt(v, 10, 64)
					st.calls += n
				case "usec":
					n, _ := strconv.ParseFloat(v, 64)
					st.usec += n
				}
			}
		}
	}
	names := make([]string, 0, len(sum))
	for n := range sum {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return sum[names[i]].usec > sum[names[j]].usec })
	var b strings.Builder
	for i, n := range names {
		if i == 6 || sum[n].usec == 0 {
			break
		}
		fmt.Fprintf(&b, "%s %.0f calls %.2f s; ", n, float64(sum[n].calls)/float64(deltas)*1e6, sum[n].usec/float64(deltas))
	}
	return b.String()
}
