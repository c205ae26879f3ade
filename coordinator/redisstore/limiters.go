package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The limiters the coordinators run. Coordinators that share a cluster
// must read its records alike: one whose limiter has another algorithm,
// period, mode or burst than the others' writes the same key's record in
// its own terms (a 1 h window's record rewritten as a 1 min window's, the
// count reset at each write: 10 counted of 60 admitted through two
// coordinators, neither saying anything). So each running coordinator
// claims its limiters' shapes in the cluster (a field of its own in
// limitersKey, with an expiry limitersTTL ahead that it renews with its
// settings' check, before writes and health probes, at most every
// metaEvery), and one whose shapes differ from a live claim refuses to
// start, naming each difference, or, running, refuses to write. Close
// gives the claim back, so all coordinators stopped and started with a new
// file (a period raised) start at once; a killed coordinator's claim
// lapses after limitersTTL, and a coordinator that meets a differing claim
// at start waits that long for it to lapse before it refuses (a restart
// with a new file right after a kill -9 starts). A coordinator that
// neither writes nor answers a health probe for limitersTTL lets its claim
// lapse too; if another one claims meanwhile, the first refuses its next
// write: the two never write at once. Limits and overrides may differ (the control
// API changes them for every coordinator; a file reload changes one
// coordinator's).

// limitersKey is the hash of the claims: a field per running coordinator
// (its claim id), "EXPIRY_MS\nSHAPES".
const limitersKey = "el:limiters"

// limitersTTL is how long a claim outlives its last renewal: 5 s.
const limitersTTL = 5 * time.Second

// limitersScript drops the lapsed claims of KEYS[1] (at ARGV[4], the
// coordinator's clock in Unix ms: TIME is not among the commands the
// documented ACL grants, and the coordinators' clocks agree within their
// skew, seconds against limitersTTL), and returns the shapes of a live claim of another coordinator
// that differ from ARGV[2], or else claims ARGV[2] under ARGV[1] for ARGV[3]
// ms and returns ARGV[2].
var limitersScript = redis.NewScript(`
local now = tonumber(ARGV[4])
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local v = all[i + 1]
  local sep = string.find(v, '\n', 1, true)
  local exp = sep and tonumber(string.sub(v, 1, sep - 1)) or 0
  if exp < now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif all[i] ~= ARGV[1] and string.sub(v, sep + 1) ~= ARGV[2] then
    return string.sub(v, sep + 1)
  end
end
redis.call('HSET', KEYS[1], ARGV[1], tostring(now + tonumber(ARGV[3])) .. '\n' .. ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return ARGV[2]
`)

// ClaimLimiters claims the cluster for shapes (one line per limiter,
// "NAME\tSHAPE", as the coordinator makes them from its configuration),
// or returns an error naming each limiter whose shape differs from a live
// claim of another coordinator that is still live after limitersTTL (a
// killed coordinator's lapses by then). The claim is renewed with the
// settings' checks while the store runs, and given back by Close.
func (s *Store) ClaimLimiters(ctx context.Context, shapes string) error {
	s.meta.mu.Lock()
	s.meta.shapes = shapes
	s.meta.mu.Unlock()
	deadline := time.Now().Add(limitersTTL + time.Second)
	for {
		held, err := s.claimLimiters(ctx, shapes)
		if err != nil {
			return fmt.Errorf("redisstore: limiters: %w", err)
		}
		err = compareShapes(shapes, held)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// claimLimiters runs limitersScript for shapes and returns the shapes it
// answers (shapes: claimed).
func (s *Store) claimLimiters(ctx context.Context, shapes string) (string, error) {
	return limitersScript.Run(ctx, s.rdb, []string{limitersKey}, s.claimID, shapes, limitersTTL.Milliseconds(), time.Now().UnixMilli()).Text()
}

// releaseLimiters gives back the claim (Close), if any.
func (s *Store) releaseLimiters() {
	s.meta.mu.Lock()
	claimed := s.meta.shapes != ""
	s.meta.mu.Unlock()
	if !claimed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	s.rdb.HDel(ctx, limitersKey, s.claimID) // best effort: else it lapses
}

// compareShapes returns nil when held is mine, else an error naming each
// limiter whose shape differs (or that only one side runs).
func compareShapes(mine, held string) error {
	if mine == held {
		return nil
	}
	parse := func(text string) map[string]string {
		m := map[string]string{}
		for _, line := range strings.Split(text, "\n") {
			if name, shape, ok := strings.Cut(line, "\t"); ok {
				m[name] = shape
			}
		}
		return m
	}
	a, b := parse(mine), parse(held)
	var diff []string
	for name, shape := range a {
		switch other, ok := b[name]; {
		case !ok:
			diff = append(diff, fmt.Sprintf("limiter %s runs here and not on the others", name))
		case other != shape:
			diff = append(diff, fmt.Sprintf("limiter %s is %s here and %s on the others", name, shape, other))
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			diff = append(diff, fmt.Sprintf("limiter %s runs on the others and not here", name))
		}
	}
	sort.Strings(diff)
	return fmt.Errorf("redisstore: the coordinators running on this cluster have other limiters (%s): %s; every coordinator must run the same limiters (limits may differ): start this one with their configuration, or stop them all and start them with the new one (waited %v for their claim to lapse)",
		limitersKey, strings.Join(diff, "; "), limitersTTL)
}

// randomClaimID is a store's claim id: 16 random hex digits.
func randomClaimID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
