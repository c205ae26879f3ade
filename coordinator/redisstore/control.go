package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The coordinators' control record (coordinator/control_store.go: run-time
// limits and fleet pauses) lives in one hash, controlKey, with no TTL: its
// generation ("gen") and the record ("v"). Every coordinator of the cluster
// reads it (every second, and before each change) and writes it only over
// the generation it read (controlScript), so two changes made at once on
// two coordinators are applied one after the other, neither lost.

// controlKey holds the control record.
const controlKey = "el:control"

// controlScript stores ARGV[3], the record of generation ARGV[2], in
// KEYS[1] when it holds generation ARGV[1] (0: nothing yet); it returns 1
// when it stored, 0 when not.
var controlScript = redis.NewScript(`
local g = redis.call('HGET', KEYS[1], 'gen') or '0'
if g ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'gen', ARGV[2], 'v', ARGV[3])
return 1
`)

// loadControlScript returns {} when KEYS[1] holds no record, {gen} when
// it holds generation ARGV[1], else {gen, record}.
var loadControlScript = redis.NewScript(`
local g = redis.call('HGET', KEYS[1], 'gen')
if not g then
  return {}
end
if g == ARGV[1] then
  return {g}
end
return {g, redis.call('HGET', KEYS[1], 'v')}
`)

// LoadControl returns the control record and its generation (0: none
// yet); when the stored generation is known, it returns it without the
// record (nil), so that polling an unchanged record costs one small
// round trip.
func (s *Store) LoadControl(ctx context.Context, known int64) ([]byte, int64, error) {
	var v []string
	err := s.retry(ctx, "control", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		defer s.stats.roundTrip(time.Now())
		var err error
		v, err = loadControlScript.Run(ctx, s.rdb, []string{controlKey}, known).StringSlice()
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("redisstore: control record: %w", err)
	}
	if len(v) == 0 {
		return nil, 0, nil
	}
	gen, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("redisstore: control record: generation %q", v[0])
	}
	if len(v) == 1 {
		return nil, gen, nil
	}
	return []byte(v[1]), gen, nil
}

// SaveControl stores value, the control record of generation gen, unless
// the stored record is no longer of generation prev (0: none): then it
// stores nothing and returns false.
func (s *Store) SaveControl(ctx context.Context, prev, gen int64, value []byte) (bool, error) {
	if err := s.settingsOK(ctx); err != nil {
		// (A coordinator refusing to write counts still wrote the fleet's
		// limits and pauses.)
		return false, err
	}
	var n int64
	err := s.retry(ctx, "control", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
		defer s.stats.roundTrip(time.Now())
		var err error
		n, err = controlScript.Run(ctx, s.rdb, []string{controlKey}, prev, gen, value).Int64()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("redisstore: control record: %w", err)
	}
	return n == 1, nil
}
