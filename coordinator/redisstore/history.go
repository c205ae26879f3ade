package redisstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/edgelimit/edgelimit/coordinator/history"
)

// The usage history (package history) in Redis, one hash tag per limiter
// (so one hash slot: a limiter's history is written by one script call):
//
//	{elh:L}:R:B:S  hash: shard S (of histShards, by key) of bucket B of resolution R
//	               ('m' or 'h') of limiter L; fields a|d|p (admitted, denied,
//	               paused) then 't' (the limiter's total) or 'k' and the key; expires its retention
//	               and one bucket after its last write (24 h + 1 min of a
//	               minute, 30 days + 1 h of an hour)
//	{elh:L}:w:ID   a write applied (AddHistory's id): a retried write adds nothing twice; 1 day
//	{elh:L}:kept   hash: key -> the kept key's view (history.AppendKept); 31 days after the last save
//
// Every coordinator adds its minutes to the same buckets (HINCRBY), so the
// history read from any of them is the fleet's. These keys are outside
// the merge's ({el:B}... and el:...), so Scan and the record expiry never
// see them.

var _ history.Store = (*Store)(nil)

// histScript sets the write marker KEYS[1] (ARGV[1]: its lifetime, ms)
// unless it exists, and then, for each hash KEYS[i] (i >= 2), reads from
// ARGV its lifetime (ms from now), a count n and n field, increment pairs.
var histScript = redis.NewScript(`
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 0 end
local a = 2
for i = 2, #KEYS do
  local exp = ARGV[a]
  local n = tonumber(ARGV[a+1])
  a = a + 2
  for j = 1, n do
    redis.call('HINCRBY', KEYS[i], ARGV[a], ARGV[a+1])
    a = a + 2
  end
  redis.call('PEXPIRE', KEYS[i], exp)
end
return 1
`)

// histWriteTTL is how long a write marker is kept, ms: a day.
const histWriteTTL = 24 * 60 * 60 * 1000

// keptTTL is how long a limiter's kept keys stay after the last save: 31 days.
const keptTTL = 31 * 24 * time.Hour

func histTag(limiter string) string { return "{elh:" + limiter + "}" }

// histShards is how many hashes a limiter's bucket is split over, by
// series: small hashes stay in Redis's compact listpack encoding (up to
// 128 fields by default), where one hash of 1000 keys' fields would be a
// hash table at about three times the bytes per field.
const histShards = 32

func histKey(limiter string, res history.Resolution, bucket int64, shard uint32) string {
	return histTag(limiter) + ":" + string(rune(res)) + ":" + strconv.FormatInt(bucket, 10) + ":" + strconv.FormatUint(uint64(shard), 10)
}

// histShard returns the shard of s's fields.
func histShard(s history.Series) uint32 {
	if s.Total {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(s.Key))
	return h.Sum32() % histShards
}

// histField returns the field of metric m ('a', 'd', 'p') of series s.
func histField(m byte, s history.Series) string {
	if s.Total {
		return string(m) + "t"
	}
	return string(m) + "k" + s.Key
}

// AddHistory implements history.Store: one script call per limiter, which
// applies id once.
func (s *Store) AddHistory(id string, pts []history.Point) error {
	type bucket struct {
		res   history.Resolution
		b     int64
		shard uint32
	}
	byLim := map[string]map[bucket]map[string]int64{}
	var lims []string
	for _, p := range pts {
		if !p.Res.Valid() {
			return fmt.Errorf("redisstore: history: bad resolution %q", p.Res)
		}
		m := byLim[p.Series.Limiter]
		if m == nil {
			m = map[bucket]map[string]int64{}
			byLim[p.Series.Limiter] = m
			lims = append(lims, p.Series.Limiter)
		}
		bk := bucket{p.Res, p.Bucket, histShard(p.Series)}
		f := m[bk]
		if f == nil {
			f = map[string]int64{}
			m[bk] = f
		}
		for _, mv := range [...]struct {
			m byte
			v int64
		}{{'a', p.Counts.Admitted}, {'d', p.Counts.Denied}, {'p', p.Counts.Paused}} {
			if mv.v > 0 {
				f[histField(mv.m, p.Series)] += mv.v
			}
		}
	}
	for _, lim := range lims {
		keys := []string{histTag(lim) + ":w:" + id}
		args := []any{histWriteTTL}
		for b, f := range byLim[lim] {
			keys = append(keys, histKey(lim, b.res, b.b, b.shard))
			// Written within about a minute of the bucket's end (its
			// hour's last minute for an hour): it lives its retention
			// and one bucket more from the last write, whatever the
			// clocks.
			ttl := (b.res.Kept() + 1) * b.res.Width() / 1e6
			args = append(args, ttl, len(f))
			for k, v := range f {
				args = append(args, k, v)
			}
		}
		err := s.retry(context.Background(), "history", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
			defer cancel()
			defer s.stats.roundTrip(time.Now())
			return histScript.Run(ctx, s.rdb, keys, args...).Err()
		})
		if err != nil {
			return fmt.Errorf("redisstore: history: %w", err)
		}
	}
	return nil
}

// ReadHistory implements history.Store: one pipeline of HMGET.
func (s *Store) ReadHistory(res history.Resolution, ser history.Series, from, to int64) ([]history.Counts, error) {
	if err := history.CheckRange(res, from, to); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	out := make([]history.Counts, to-from)
	if to == from {
		return out, nil
	}
	fields := []string{histField('a', ser), histField('d', ser), histField('p', ser)}
	shard := histShard(ser)
	err := s.retry(context.Background(), "history read", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		defer s.stats.roundTrip(time.Now())
		cmds := make([]*redis.SliceCmd, 0, to-from)
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for b := from; b < to; b++ {
				cmds = append(cmds, p.HMGet(ctx, histKey(ser.Limiter, res, b, shard), fields...))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i, c := range cmds {
			vs := c.Val()
			var v [3]int64
			for j := range v {
				if j < len(vs) && vs[j] != nil {
					str, _ := vs[j].(string)
					v[j], _ = strconv.ParseInt(str, 10, 64)
				}
			}
			out[i] = history.Counts{Admitted: v[0], Denied: v[1], Paused: v[2]}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: history: %w", err)
	}
	return out, nil
}

// TrimHistory implements history.Store: nothing to do, every bucket
// expires by itself.
func (s *Store) TrimHistory(history.Resolution, int64) error { return nil }

// SaveKept implements history.Store.
func (s *Store) SaveKept(limiter string, kept []history.Kept, gone []string) error {
	k := histTag(limiter) + ":kept"
	err := s.retry(context.Background(), "kept keys", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		defer s.stats.roundTrip(time.Now())
		_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			if len(gone) > 0 {
				p.HDel(ctx, k, gone...)
			}
			if len(kept) > 0 {
				args := make([]any, 0, 2*len(kept))
				for i := range kept {
					args = append(args, kept[i].Key, string(history.AppendKept(nil, &kept[i])))
				}
				p.HSet(ctx, k, args...)
				p.Expire(ctx, k, keptTTL)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("redisstore: kept keys: %w", err)
	}
	return nil
}

// LoadKept implements history.Store; values that do not decode are
// skipped.
func (s *Store) LoadKept(limiter string) ([]history.Kept, error) {
	var m map[string]string
	err := s.retry(context.Background(), "kept keys", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		defer s.stats.roundTrip(time.Now())
		var err error
		m, err = s.rdb.HGetAll(ctx, histTag(limiter)+":kept").Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: kept keys: %w", err)
	}
	out := make([]history.Kept, 0, len(m))
	for key, v := range m {
		if k, err := history.DecodeKept(key, []byte(v)); err == nil {
			out = append(out, k)
		}
	}
	return out, nil
}
