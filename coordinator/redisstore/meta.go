package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The cluster's settings. The bucket count decides where every key lives
// (its hash slot) and the format version how records and marks are laid
// out; coordinators that disagree on either split a key's count between
// two records, silently. So the first coordinator to start stores both in
// the cluster (metaKey, a hash with no TTL) and every coordinator checks
// them at Open: another value refuses to start, naming both.

// FormatVersion is the version of the layout of the keys, records and
// marks in the cluster (this file's, redis.go's and count.go's, and the
// key records coordinator/merge encodes): 4. Format 1 had no counter
// records, which a coordinator of format 1 takes for corrupt key
// records; format 2 had no section for what a sliding window's leases
// hold of the window before theirs (merge's isoState.prevRes), which a
// coordinator of format 2 takes for a corrupt record; format 3 had no
// sections for what a reply granted for refused requests (isoState.owed)
// and what a key's asks say of its requests' cost, which a coordinator of
// format 3 takes for a corrupt record (see upgradableFrom).
const FormatVersion = 4

// metaKey holds the cluster's settings: buckets, format.
const metaKey = "el:meta"

// upgradableFrom are the formats this version upgrades in place. Format 1
// holds only records and marks that later formats read as they are
// (format 2 adds counter records; an approximate windowed key's format-1
// record is replaced by a counter at its next write, its count starting
// again in the current window); format 2's and 3's records are format 4's
// without the optional sections formats 3 and 4 add. So the first
// coordinator of format 4 to start on a format-1, 2 or 3 cluster with the
// same bucket count moves it to format 4. An older coordinator started
// afterwards refuses to start; one still running refuses to write once it
// checks the settings again (at most a second later, before a write), and
// answers errors (a corrupt record) for the keys written in the new layout
// until then: upgrade every coordinator of a cluster together.
var upgradableFrom = [3]int{1, 2, 3}

// metaScript stores ARGV buckets and format in KEYS[1] unless it holds
// them already, moves a cluster of format ARGV[3], ARGV[4] or ARGV[5] with
// the same bucket count to format ARGV[2], and returns what it holds
// (buckets, format).
var metaScript = redis.NewScript(`
local b = redis.call('HGET', KEYS[1], 'buckets')
if not b then
  redis.call('HSET', KEYS[1], 'buckets', ARGV[1], 'format', ARGV[2])
  return {ARGV[1], ARGV[2]}
end
local f = redis.call('HGET', KEYS[1], 'format') or ''
if (f == ARGV[3] or f == ARGV[4] or f == ARGV[5]) and b == ARGV[1] then
  redis.call('HSET', KEYS[1], 'format', ARGV[2])
  return {b, ARGV[2]}
end
return {b, f}
`)

// checkMeta stores the bucket count and format version at first start and
// refuses another coordinator's different values. explicit reports that
// the bucket count was chosen (not the default): a cluster holding keys
// but no settings (state written before they were stored) is adopted only
// then.
func (s *Store) checkMeta(ctx context.Context, explicit bool) error {
	if !explicit {
		if err := s.rdb.HGet(ctx, metaKey, "buckets").Err(); err == redis.Nil {
			n, err := s.dbSize(ctx)
			if err != nil {
				return fmt.Errorf("redisstore: settings: %w", err)
			}
			if n > 0 {
				return fmt.Errorf("redisstore: the cluster holds %d keys but no edgelimit settings (%s): state written before the bucket count was stored there, or by something else; start with --redis-buckets set to the bucket count it was written with (64 before the default changed to %d) to adopt it, or empty the cluster", n, metaKey, DefaultBuckets)
			}
		} else if err != nil {
			return fmt.Errorf("redisstore: settings: %w", err)
		}
	}
	v, err := s.runMeta(ctx)
	if err != nil {
		return fmt.Errorf("redisstore: settings: %w", err)
	}
	return s.compareMeta(v)
}

// runMeta runs metaScript with this coordinator's settings and returns
// what the cluster holds (buckets, format).
func (s *Store) runMeta(ctx context.Context) ([]string, error) {
	return metaScript.Run(ctx, s.rdb, []string{metaKey}, s.opts.Buckets, FormatVersion, upgradableFrom[0], upgradableFrom[1], upgradableFrom[2]).StringSlice()
}

// compareMeta refuses settings v (buckets, format) other than this
// coordinator's, naming every value that differs.
func (s *Store) compareMeta(v []string) error {
	if len(v) != 2 {
		return fmt.Errorf("redisstore: settings: %s holds %q", metaKey, v)
	}
	var diff []string
	if v[0] != strconv.Itoa(s.opts.Buckets) {
		diff = append(diff, fmt.Sprintf("it was set up with %s buckets, this coordinator has %d (--redis-buckets): every coordinator of a cluster must use the same; start it with --redis-buckets %s", v[0], s.opts.Buckets, v[0]))
	}
	if v[1] != strconv.Itoa(FormatVersion) {
		diff = append(diff, fmt.Sprintf("it holds edgelimit state in format %s, this coordinator writes format %d: run a coordinator of the version that wrote it", v[1], FormatVersion))
	}
	if len(diff) > 0 {
		return fmt.Errorf("redisstore: the cluster's settings (%s) are not this coordinator's: %s; or empty the cluster", metaKey, strings.Join(diff, "; and "))
	}
	return nil
}

// Settings while running. A Redis that lost metaKey (restarted without
// persistence, flushed) while coordinators run lets the next coordinator
// store its own bucket count there: before, one started with 64 buckets
// beside one of 512 split a strict key of 200 into two counts, and 400
// were admitted. So a running coordinator checks the settings again, at
// most every metaEvery, before its writes (storing its own if they are
// gone, as at Open) and refuses to write while they are another's; the
// mismatch is logged once, and so is its end.

// metaEvery is how often a running coordinator checks the cluster's
// settings again: 1 s.
const metaEvery = time.Second

// metaCheck caches the last check of the settings.
type metaCheck struct {
	mu     sync.Mutex
	at     time.Time
	err    error  // the settings are another coordinator's
	shapes string // the limiters claimed (limiters.go); "" before ClaimLimiters
}

// settingsOK returns the error of settings that are not this
// coordinator's, checking them again if the last check is metaEvery old. A
// check whose round trip fails changes nothing: the writes' own round
// trips fail and retry then.
func (s *Store) settingsOK(ctx context.Context) error {
	m := &s.meta
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.at) < metaEvery {
		return m.err
	}
	v, err := s.runMeta(ctx)
	if err != nil {
		return m.err
	}
	m.at = time.Now()
	err = s.compareMeta(v)
	if err == nil && m.shapes != "" {
		// The limiters' claim renewed (limiters.go).
		held, cerr := s.claimLimiters(ctx, m.shapes)
		if cerr != nil {
			return m.err
		}
		err = compareShapes(m.shapes, held)
	}
	switch {
	case err != nil && m.err == nil:
		s.opts.Logger.Error("redisstore: refusing writes: "+err.Error(), "error", err.Error())
	case err == nil && m.err != nil:
		s.opts.Logger.Info("redisstore: the cluster's settings are this coordinator's again; writing")
	}
	m.err = err
	return err
}

// dbSize returns the number of keys on every master.
func (s *Store) dbSize(ctx context.Context) (int64, error) {
	var mu sync.Mutex
	var n int64
	err := s.forEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		k, err := c.DBSize(ctx).Result()
		mu.Lock()
		n += k
		mu.Unlock()
		return err
	})
	return n, err
}
