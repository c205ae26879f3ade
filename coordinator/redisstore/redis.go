// Package redisstore is the merge.SharedStore on Redis (a Redis Cluster,
// one standalone server, or a master behind Sentinels: client.go):
// several coordinators share it, each running the merge core's
// shared-mode merger (merge.SharedMerger) over it. Each bucket's part of a
// group of batches is written by one Lua script that checks key versions
// and the isolates' marks in that hash slot (write.go). Failovers are
// retried through (retry.go), WAIT makes writes durable on replicas
// (wait.go), the bucket count and format are kept in Redis (meta.go), and
// Probe answers the coordinator's health checks (health.go).
package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"

	"github.com/redis/go-redis/v9"
)

// Redis Cluster layout (see coordinator/merge/shared.go for the protocol):
//
//	{el:B}<storage key>     key record: 20-digit version, then the shared record
//	{el:B}<storage key>     or a counter record (count.go: approximate windowed limiters)
//	{el:B}m<isolate>        the isolate's mark in bucket B: the last Seq applied there
//	{el:B}n<isolate>        the same for its counted part there (count.go)
//	el:h<isolate>           hash: s = Seq, v = the isolate's high-water mark (hwmState);
//	                        no tag before the id: the coordinator refuses ids with { or }
//
// B = FNV-1a(storage key) mod Options.Buckets: one hash tag, so one
// hash slot, per bucket; a sub-batch's keys and its mark share that slot
// and are written by one script.

// DefaultBuckets is Options.Buckets by default: 512 hash slots, enough to
// spread the keys over up to 128 masters with at least 4 buckets each (a
// master's share of the keys varies less the more buckets it has). The
// cost: a batch costs Redis one mark and one script call per bucket it
// touches, and a sequence mark per isolate per bucket it touched is kept,
// so more buckets are dearer for large batches: with batches of 100 keys
// on 3 masters, 16 buckets took 15-19 µs of master time per delta, 64 took
// 28, 256 took 34 and 1024 took 37-46 (one run each, 3 s, this 2-core VM;
// docs/scale-out.md). Clusters of up to 16 masters can use 64
// (--redis-buckets 64), chosen when the cluster is first used: the count
// is stored in the cluster (meta.go) and cannot change without emptying
// it.
const DefaultBuckets = 512

// Options configure Open. Zero fields take the defaults.
type Options struct {
	// Addrs are the seed nodes of the cluster (host:port; the others are
	// discovered), the standalone server, or the Sentinels (Mode).
	// Required.
	Addrs []string
	// Username and Password authenticate (ACL user, or Password alone for
	// requirepass). Default: none.
	Username, Password string
	// Wait, when > 0, makes every write wait until this many replicas of
	// the master acknowledged it (WAIT Wait WaitTimeout) before the batch
	// is answered; fewer is refused (the isolate retries; nothing is
	// applied twice) or, with WaitDegraded, accepted and counted (wait.go).
	// Default 0: acknowledged writes may be lost when a master fails
	// before replicating them (asynchronous replication).
	Wait int
	// WaitTimeout bounds WAIT. Default 1s.
	WaitTimeout time.Duration
	// Buckets is the number of buckets (hash tags, so hash slots) the keys
	// are spread over: at least 4 per master. The first coordinator stores
	// it in the cluster; one with another value refuses to start, and
	// changing it means emptying the cluster (every key moves). Default
	// DefaultBuckets (512).
	Buckets int
	// Timeout bounds one command (dial, read, write). Default 2s.
	Timeout time.Duration
	// PoolSize is the connections per node. Default 64.
	PoolSize int
	// RetryFor bounds how long a read or write keeps being retried through
	// a failover (connection errors, CLUSTERDOWN, TRYAGAIN, MOVED: the slot
	// map is reloaded and the round trip tried again at once), and how
	// long WAIT is repeated while fewer than Wait replicas acknowledged;
	// the caller's context bounds it too. Default DefaultRetryFor (3s:
	// Redis promotes a replica 2-3 s after its master fails with
	// cluster-node-timeout 1000, and the edges' sync timeout is 5 s).
	RetryFor time.Duration
	// WaitDegraded chooses what a write does when WAIT cannot be met (a
	// master left with fewer than Wait replicas, as after a failover with
	// one replica per master): false (the default) refuses it (the batch
	// answers 503 and is resent; /healthz is 503 while a master has fewer
	// than Wait replicas online), true accepts it with the replicas there
	// are, counts a WAIT shortfall (Stats.WaitDegraded) and, until a WAIT
	// on that master is met again, waits only 10 ms for its replicas.
	WaitDegraded bool
	// Logger receives the store's logs (an outage and its end, failovers).
	// Default slog.Default().
	Logger *slog.Logger
	// Mode says what Addrs are: a cluster's seed nodes, one standalone
	// server, or Sentinels (client.go). Default ModeAuto: a cluster, or a
	// standalone server when the one address given is not in cluster mode.
	Mode Mode
	// SentinelMaster names the master the Sentinels watch (ModeSentinel),
	// SentinelUsername and SentinelPassword authenticate to the Sentinels
	// (default: none; Username and Password are the master's).
	SentinelMaster, SentinelUsername, SentinelPassword string
	// TLS, when set, makes every connection TLS with this configuration
	// (rediss://; its RootCAs from the URL's ca=FILE, else the system's).
	// Default nil: plain TCP.
	TLS *tls.Config
}

// DefaultRetryFor is Options.RetryFor by default.
const DefaultRetryFor = 3 * time.Second

func splitHostPort(a string) (string, int, error) {
	i := strings.LastIndexByte(a, ':')
	if i <= 0 {
		return "", 0, fmt.Errorf("address %q: want HOST:PORT", a)
	}
	p, err := strconv.Atoi(a[i+1:])
	if err != nil || p <= 0 || p > 65535 {
		return "", 0, fmt.Errorf("address %q: bad port", a)
	}
	return a[:i], p, nil
}

// CredentialsFromEnv fills o.Username and o.Password from
// EDGELIMIT_REDIS_USERNAME and EDGELIMIT_REDIS_PASSWORD, and the
// Sentinels' from EDGELIMIT_REDIS_SENTINEL_USERNAME and
// EDGELIMIT_REDIS_SENTINEL_PASSWORD, when set.
func CredentialsFromEnv(o *Options) {
	for _, e := range []struct {
		name string
		dst  *string
	}{{"EDGELIMIT_REDIS_USERNAME", &o.Username}, {"EDGELIMIT_REDIS_PASSWORD", &o.Password},
		{"EDGELIMIT_REDIS_SENTINEL_USERNAME", &o.SentinelUsername}, {"EDGELIMIT_REDIS_SENTINEL_PASSWORD", &o.SentinelPassword}} {
		if v := os.Getenv(e.name); v != "" {
			*e.dst = v
		}
	}
}

// Store is the SharedStore on Redis: coordinators over the same Redis
// form a stateless tier (merge/shared.go). Durability is Redis's:
// a write is acknowledged once the master applied it (and, with
// Options.Wait, once that many replicas did).
type Store struct {
	rdb     redis.UniversalClient // *redis.ClusterClient, or *redis.Client (standalone, Sentinel)
	opts    Options
	rl      reloader
	pr      prober
	stats   stats
	health  outage
	meta    metaCheck     // the settings checked while running (meta.go)
	claimID string        // this store's claim of the limiters (limiters.go): random
	stop    chan struct{} // closed by Close: ends watch
	done    chan struct{} // closed when watch returned
	closing sync.Once
	short   sync.Map // master address -> true while WAIT there falls short (WaitDegraded)
}

// Open connects to the cluster of o.Addrs, checks it answers, and checks
// (or, at first start, stores) the bucket count and format version kept in
// the cluster (meta.go).
func Open(ctx context.Context, o Options) (*Store, error) {
	if len(o.Addrs) == 0 {
		return nil, errors.New("redisstore: no address")
	}
	explicit := o.Buckets > 0
	if !explicit {
		o.Buckets = DefaultBuckets
	}
	if o.Buckets > 16384 {
		return nil, fmt.Errorf("redisstore: %d buckets: at most 16384 (the cluster's hash slots)", o.Buckets)
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = time.Second
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 64
	}
	if o.RetryFor <= 0 {
		o.RetryFor = DefaultRetryFor
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	setClientLog(o.Logger)
	rdb, err := connect(ctx, &o)
	if err != nil {
		return nil, err
	}
	s := &Store{rdb: rdb, opts: o, claimID: randomClaimID()}
	s.health = outage{log: o.Logger, stats: &s.stats}
	if err := s.checkMeta(ctx, explicit); err != nil {
		rdb.Close()
		return nil, err
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.watch()
	return s, nil
}

// watchEvery is how often a store probes Redis on its own: 1 s.
const watchEvery = time.Second

// watch probes Redis every watchEvery until Close, besides the probes of
// health checks and metric scrapes, so that a failover between two
// scrapes, an outage and settings that changed under a running coordinator
// are seen, counted and logged when they happen, not at the next scrape
// (a Sentinel failover went uncounted by a coordinator nobody scraped
// before it).
func (s *Store) watch() {
	defer close(s.done)
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Probe(context.Background())
		}
	}
}

// Client returns the client (for tests and benchmarks).
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Tag returns the hash tag of bucket, which starts the Redis keys of the
// bucket (its key records and its isolates' marks).
func (s *Store) Tag(bucket int) string { return "{el:" + strconv.Itoa(bucket) + "}" }

// Bucket returns the bucket of a storage key.
func (s *Store) Bucket(key []byte) int {
	// FNV-1a, 64 bits (hash/fnv's New64a), without its allocation.
	h := uint64(14695981039346656037)
	for _, c := range key {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return int(h % uint64(s.opts.Buckets))
}

// RedisKey maps a storage key to its Redis key.
func (s *Store) RedisKey(key []byte) string {
	if len(key) > 0 && key[0] == merge.PrefixKey {
		return s.Tag(s.Bucket(key)) + string(key)
	}
	return "el:" + string(key)
}

const versionLen = 20

func splitVersioned(v string) (merge.Versioned, error) {
	if len(v) < versionLen {
		return merge.Versioned{}, merge.ErrCorrupt
	}
	n, err := strconv.ParseUint(v[:versionLen], 10, 64)
	if err != nil || n == 0 {
		return merge.Versioned{}, merge.ErrCorrupt
	}
	return merge.Versioned{Value: []byte(v[versionLen:]), Version: n}, nil
}

func versionPrefix(n uint64) string {
	s := strconv.FormatUint(n, 10)
	return strings.Repeat("0", versionLen-len(s)) + s
}

// Get returns the value of a key record (without its version; a counter
// record as stored, count.go), of an isolate's high-water mark, or of any
// other key.
func (s *Store) Get(key []byte) ([]byte, bool, error) {
	var v string
	err := s.retry(context.Background(), "get", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		var err error
		defer s.stats.roundTrip(time.Now())
		if len(key) > 0 && key[0] == merge.PrefixHWM {
			v, err = s.rdb.HGet(ctx, s.RedisKey(key), "v").Result()
		} else {
			v, err = s.rdb.Get(ctx, s.RedisKey(key)).Result()
		}
		return err
	})
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: get: %w", err)
	}
	if len(key) > 0 && key[0] == merge.PrefixKey && !isCounter(v) {
		vv, err := splitVersioned(v)
		if err != nil {
			return nil, false, fmt.Errorf("redisstore: get: %w", err)
		}
		return vv.Value, true, nil
	}
	return []byte(v), true, nil
}

// Commit deletes the keys of ops (one by one: each delete is atomic on its
// own). Sets and range deletes are refused: key records are written only
// through WriteShared.
func (s *Store) Commit(ops []merge.Op) error {
	if err := s.settingsOK(context.Background()); err != nil {
		return err
	}
	for _, op := range ops {
		if !op.Delete || op.End != nil {
			return errors.New("redisstore: only single-key deletes are committed directly")
		}
		err := s.retry(context.Background(), "del", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
			defer cancel()
			defer s.stats.roundTrip(time.Now())
			return s.rdb.Del(ctx, s.RedisKey(op.Key)).Err()
		})
		if err != nil {
			return fmt.Errorf("redisstore: del: %w", err)
		}
	}
	return nil
}

// Scan visits the key records and high-water marks of prefix (in storage
// key order, by SCAN over every master; for admin use, not the hot path).
// The log prefix is always empty: shared mode keeps no log.
func (s *Store) Scan(prefix, start []byte, fn func(key, value []byte) bool) error {
	if len(prefix) == 0 || (prefix[0] != merge.PrefixKey && prefix[0] != merge.PrefixHWM) {
		return nil
	}
	ctx := context.Background()
	var mu sync.Mutex
	var keys []string
	err := s.forEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, "*", 1000).Iterator()
		for it.Next(ctx) {
			k := it.Val()
			var sk string
			switch {
			case strings.HasPrefix(k, "el:"):
				sk = k[3:]
			case strings.HasPrefix(k, "{el:"):
				i := strings.IndexByte(k, '}')
				if i < 0 || i+1 >= len(k) || k[i+1] != merge.PrefixKey {
					continue
				}
				sk = k[i+1:]
			default:
				continue
			}
			if strings.HasPrefix(sk, string(prefix)) && sk >= string(start) {
				mu.Lock()
				keys = append(keys, sk)
				mu.Unlock()
			}
		}
		return it.Err()
	})
	if err != nil {
		return fmt.Errorf("redisstore: scan: %w", err)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, found, err := s.Get([]byte(k))
		if err != nil {
			return err
		}
		if found && !fn([]byte(k), v) {
			return nil
		}
	}
	return nil
}

// Close closes the connections.
func (s *Store) Close() error {
	if s.stop != nil {
		s.closing.Do(func() { close(s.stop) })
		<-s.done
	}
	s.releaseLimiters() // limiters.go
	return s.rdb.Close()
}

// ReadShared reads keys, marks and isolates' high-water marks in one
// pipeline (one round trip per master).
func (s *Store) ReadShared(ctx context.Context, keys [][]byte, marks []merge.MarkRef, isolates []string) ([]merge.Versioned, []int64, [][]byte, error) {
	kc := make([]*redis.StringCmd, len(keys))
	mc := make([]*redis.StringCmd, len(marks))
	hc := make([]*redis.StringCmd, len(isolates))
	err := s.retry(ctx, "read", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		defer s.stats.roundTrip(time.Now())
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				kc[i] = p.Get(ctx, s.RedisKey(k))
			}
			for i, m := range marks {
				mc[i] = p.Get(ctx, s.Tag(m.Bucket)+"m"+m.Isolate)
			}
			for i, iso := range isolates {
				hc[i] = p.HGet(ctx, s.RedisKey([]byte(merge.HWMStorageKey(iso))), "v")
			}
			return nil
		})
		if errors.Is(err, redis.Nil) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("redisstore: read: %w", err)
	}
	result := func(c *redis.StringCmd) (string, bool, error) {
		v, err := c.Result()
		if errors.Is(err, redis.Nil) {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("redisstore: read: %w", err)
		}
		return v, true, nil
	}
	vals := make([]merge.Versioned, len(keys))
	for i, c := range kc {
		v, found, err := result(c)
		if err != nil {
			return nil, nil, nil, err
		}
		if !found {
			continue
		}
		if c, ok := decodeCounter(v); ok {
			vals[i].Counter = &c
			continue
		}
		if vals[i], err = splitVersioned(v); err != nil {
			return nil, nil, nil, fmt.Errorf("redisstore: read %q: %w", keys[i], err)
		}
	}
	seqs := make([]int64, len(marks))
	for i, c := range mc {
		v, found, err := result(c)
		if err != nil {
			return nil, nil, nil, err
		}
		if !found {
			continue
		}
		if seqs[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, nil, nil, fmt.Errorf("redisstore: mark %q: %w", v, merge.ErrCorrupt)
		}
	}
	hwms := make([][]byte, len(isolates))
	for i, c := range hc {
		v, found, err := result(c)
		if err != nil {
			return nil, nil, nil, err
		}
		if found {
			hwms[i] = []byte(v)
		}
	}
	return vals, seqs, hwms, nil
}
