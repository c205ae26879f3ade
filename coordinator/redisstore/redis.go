// Package redisstore is the merge.SharedStore on a Redis Cluster: several
// coordinators share it, each running the merge core's shared-mode merger
// (merge.SharedMerger) over it. Each bucket's part of a group of batches is
// written by one Lua script that checks key versions and the isolates'
// marks in that hash slot.
package redisstore

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
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
//	{el:B}m<isolate>        the isolate's mark in bucket B: the last Seq applied there
//	el:h<isolate>           hash: s = Seq, v = the isolate's high-water mark (hwmState)
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
	// Addrs are the seed nodes of the cluster (host:port); the others are
	// discovered. Required.
	Addrs []string
	// Username and Password authenticate (ACL user, or Password alone for
	// requirepass). Default: none.
	Username, Password string
	// Wait, when > 0, makes every write wait until this many replicas of
	// the master acknowledged it (WAIT Wait WaitTimeout) before the batch
	// is answered; fewer is an error (the isolate retries; nothing is
	// applied twice). Default 0: acknowledged writes may be lost when a
	// master fails before replicating them (asynchronous replication).
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

// Store is the SharedStore on a Redis Cluster: coordinators over the
// same cluster form a stateless tier (shared.go). Durability is Redis's:
// a write is acknowledged once the master applied it (and, with
// Options.Wait, once that many replicas did).
type Store struct {
	rdb    redis.UniversalClient // *redis.ClusterClient, or *redis.Client (standalone, Sentinel)
	opts   Options
	rl     reloader
	pr     prober
	stats  stats
	health outage
	short  sync.Map // master address -> true while WAIT there falls short (WaitDegraded)
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
	rdb, err := connect(ctx, &o)
	if err != nil {
		return nil, err
	}
	s := &Store{rdb: rdb, opts: o}
	s.health = outage{log: o.Logger, stats: &s.stats}
	if err := s.checkMeta(ctx, explicit); err != nil {
		rdb.Close()
		return nil, err
	}
	return s, nil
}

// Client returns the client (for tests and benchmarks).
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Tag returns the hash tag of bucket, which starts the Redis keys of the
// bucket (its key records and its isolates' marks).
func (s *Store) Tag(bucket int) string { return "{el:" + strconv.Itoa(bucket) + "}" }

// Bucket returns the bucket of a storage key.
func (s *Store) Bucket(key []byte) int {
	h := fnv.New64a()
	h.Write(key)
	return int(h.Sum64() % uint64(s.opts.Buckets))
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

// Get returns the value of a key record (without its version), of an
// isolate's high-water mark, or of any other key.
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
	if len(key) > 0 && key[0] == merge.PrefixKey {
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
func (s *Store) Close() error { return s.rdb.Close() }

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

// subScript is a SubWrite: KEYS are the M marks, then the records; ARGV[1]
// is M, then per mark its seq and TTL (ms), then per record the expected
// version prefix ("" when absent), the new value and its TTL (ms). Returns
// 0 applied, 1 conflict (a version changed), 2 duplicate (a mark is
// already at its seq: the write of an earlier attempt, whose reply or WAIT
// was lost; the mark's TTL is renewed, a write, so that WAIT after it
// covers that earlier write too).
var subScript = redis.NewScript(`
local nm = tonumber(ARGV[1])
for i = 1, nm do
  local m = redis.call('GET', KEYS[i])
  if m and tonumber(m) >= tonumber(ARGV[2*i]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2*i+1])
    return 2
  end
end
local base = 2*nm + 1
for i = nm + 1, #KEYS do
  local j = base + 3*(i-nm-1)
  local v = redis.call('GET', KEYS[i])
  local want = ARGV[j+1]
  if v then
    if string.sub(v, 1, 20) ~= want then return 1 end
  elseif want ~= '' then return 1 end
end
for i = nm + 1, #KEYS do
  local j = base + 3*(i-nm-1)
  redis.call('SET', KEYS[i], ARGV[j+2], 'PX', ARGV[j+3])
end
for i = 1, nm do
  redis.call('SET', KEYS[i], ARGV[2*i], 'PX', ARGV[2*i+1])
end
return 0
`)

// markScript advances an isolate's high-water mark: KEYS[1]; ARGV seq,
// value, TTL (ms). Returns 1 when set, 0 when it already held seq or more.
var markScript = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], 's') or '0')
if cur >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[1], 'v', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

func ms(ns int64) int64 { return max(ns/1e6, 1) }

// evalOnMasters runs each script call on the master of its first key,
// grouped per master into one pipeline (one round trip per master), with
// WAIT at the end of each pipeline when Options.Wait is set. It returns
// each call's integer result; ran reports, per call, whether its script
// ran (res holds its result) even when err reports a failure (of other
// calls, or of WAIT). Calls that did not run for a retryable error (a
// failover: see retry.go) are sent again, to the master the reloaded slot
// map names, until Options.RetryFor or ctx's end. A call that did run but
// whose reply was lost is sent again too: the marks make it a duplicate.
func (s *Store) evalOnMasters(ctx context.Context, calls []scriptCall) (res []int64, ran []bool, err error) {
	res, ran = make([]int64, len(calls)), make([]bool, len(calls))
	pending := make([]int, len(calls))
	for i := range pending {
		pending[i] = i
	}
	end := s.retryDeadline(ctx, time.Now())
	wait := retryBackoff
	for {
		// Room for the pipeline and for WAIT's own timeout, so that a WAIT
		// not met is answered as such rather than cut by the deadline.
		actx, cancel := context.WithDeadline(ctx, later(end, time.Now().Add(2*s.opts.Timeout+s.opts.WaitTimeout)))
		errs := s.evalPending(actx, calls, pending, res, ran, end)
		cancel()
		var again []int
		var failed []error
		retry := false
		for _, e := range errs {
			if e.err == nil {
				continue
			}
			failed = append(failed, e.err)
			if retryable(e.err) {
				s.health.failed("write", e.err)
				retry = true
				for _, i := range e.idx {
					if !ran[i] {
						again = append(again, i)
					}
				}
			}
		}
		if len(failed) == 0 {
			s.health.succeeded()
			return res, ran, nil
		}
		err = errors.Join(failed...)
		if !retry || len(again) == 0 || ctx.Err() != nil || time.Now().Add(wait).After(end) {
			if retry {
				s.reloadLazy(ctx) // learn the new layout for the next group
			}
			return res, ran, err
		}
		s.stats.retries.Add(1)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return res, ran, err
		}
		wait = min(2*wait, retryBackoffMax)
		s.reload(ctx)
		pending = again
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// groupErr is the outcome of one master's pipeline: the calls it carried
// and its error.
type groupErr struct {
	idx []int
	err error
}

// evalPending sends the calls of pending, one pipeline per master.
func (s *Store) evalPending(ctx context.Context, calls []scriptCall, pending []int, res []int64, ran []bool, end time.Time) []groupErr {
	type group struct {
		node *redis.Client
		idx  []int
	}
	groups := map[*redis.Client]*group{}
	var order []*group
	for _, i := range pending {
		c := calls[i]
		node, err := s.masterFor(ctx, c.keys[0])
		if err != nil {
			return []groupErr{{idx: pending, err: fmt.Errorf("redisstore: master of %q: %w", c.keys[0], err)}}
		}
		g := groups[node]
		if g == nil {
			g = &group{node: node}
			groups[node] = g
			order = append(order, g)
		}
		g.idx = append(g.idx, i)
	}
	out := make([]groupErr, len(order))
	var wg sync.WaitGroup
	for gi, g := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[gi] = groupErr{idx: g.idx, err: s.evalGroup(ctx, g.node, calls, g.idx, res, ran, end)}
		}()
	}
	wg.Wait()
	return out
}

type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// evalGroup runs the calls of idx on node in one pipeline, on one
// connection, then WAITs there (WAIT counts the replicas that have this
// connection's writes) when Options.Wait is set; see waitReplicas.
func (s *Store) evalGroup(ctx context.Context, node *redis.Client, calls []scriptCall, idx []int, res []int64, ran []bool, end time.Time) error {
	addr := node.Options().Addr
	conn := node.Conn()
	defer conn.Close()
	cmds := make([]*redis.Cmd, len(idx))
	run := func(j []int, sha bool) error {
		defer s.stats.roundTrip(time.Now())
		_, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, j := range j {
				c := calls[idx[j]]
				if sha {
					cmds[j] = c.script.EvalSha(ctx, p, c.keys, c.args...)
				} else {
					cmds[j] = c.script.Eval(ctx, p, c.keys, c.args...)
				}
			}
			return nil
		})
		return err
	}
	all := make([]int, len(idx))
	for j := range all {
		all[j] = j
	}
	err := run(all, true)
	if err != nil {
		// A script this node has not seen yet (first use, or a replica
		// that just took over): send those calls with the script itself.
		var again []int
		for j, c := range cmds {
			if c.Err() != nil && redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
				again = append(again, j)
			}
		}
		if len(again) > 0 {
			err = run(again, false)
			for _, c := range cmds {
				if c.Err() != nil {
					err = c.Err()
				}
			}
		}
	}
	var first error
	wrote := false
	for j, i := range idx {
		if cmds[j] == nil {
			continue
		}
		v, err := cmds[j].Int64()
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		res[i], ran[i] = v, true
		wrote = wrote || v != 1
	}
	// The pipeline's own error first: a connection error leaves its
	// commands without a reply, which Int64 reports as a type error.
	if err = cmp.Or(err, first); err != nil {
		return fmt.Errorf("redisstore: write on %s: %w", addr, err)
	}
	if s.opts.Wait > 0 && wrote {
		err := s.waitReplicas(ctx, conn, addr, end)
		if retryable(err) {
			// The connection broke before WAIT answered: what it wrote is
			// not known to be replicated. Send those calls again (their
			// marks make them duplicates if the write survived, and WAIT
			// after them covers it).
			for _, i := range idx {
				if ran[i] && res[i] != 1 {
					ran[i] = false
				}
			}
		}
		return err
	}
	return nil
}

// WriteShared performs subs (see SubWrite), one script call each, grouped
// per master.
func (s *Store) WriteShared(ctx context.Context, subs []merge.SubWrite) ([]merge.SubOutcome, error) {
	calls := make([]scriptCall, len(subs))
	for i := range subs {
		w := &subs[i]
		t := s.Tag(w.Bucket)
		keys := make([]string, 0, len(w.Marks)+len(w.Keys))
		args := make([]any, 0, 1+2*len(w.Marks)+3*len(w.Keys))
		args = append(args, len(w.Marks))
		for _, m := range w.Marks {
			keys = append(keys, t+"m"+m.Isolate)
			args = append(args, m.Seq, ms(m.TTL))
		}
		for j, k := range w.Keys {
			rk := s.RedisKey(k)
			if !strings.HasPrefix(rk, t) {
				return nil, fmt.Errorf("redisstore: key %q is not in bucket %d", k, w.Bucket)
			}
			keys = append(keys, rk)
			want := ""
			if w.Versions[j] != 0 {
				want = versionPrefix(w.Versions[j])
			}
			args = append(args, want, versionPrefix(w.Versions[j]+1)+string(w.Values[j]), ms(w.TTLs[j]))
		}
		calls[i] = scriptCall{script: subScript, keys: keys, args: args}
	}
	res, ran, err := s.evalOnMasters(ctx, calls)
	outs := make([]merge.SubOutcome, len(res))
	for i, r := range res {
		switch {
		case !ran[i]:
			outs[i] = merge.SubFailed
		case r == 0 && err != nil:
			outs[i] = merge.SubUnconfirmed // written; WAIT (or a neighbour) failed
		case r == 0:
			outs[i] = merge.SubApplied
		case r == 1:
			outs[i] = merge.SubConflict
		case r == 2:
			outs[i] = merge.SubDuplicate
		default:
			return nil, fmt.Errorf("redisstore: script answered %d", r)
		}
	}
	return outs, err
}

// AdvanceMarks advances isolates' high-water marks (each unless already at
// its seq or beyond), grouped per master.
func (s *Store) AdvanceMarks(ctx context.Context, marks []merge.MarkSet) error {
	calls := make([]scriptCall, len(marks))
	for i, m := range marks {
		calls[i] = scriptCall{script: markScript, keys: []string{s.RedisKey([]byte(merge.HWMStorageKey(m.Isolate)))},
			args: []any{m.Seq, string(m.Value), ms(m.TTL)}}
	}
	_, _, err := s.evalOnMasters(ctx, calls)
	return err
}

var _ merge.SharedStore = (*Store)(nil)
