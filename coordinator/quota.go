package coordinator

import (
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/internal/distinct"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Per-token quotas. With tokens, each token may name at most
// Options.TokenKeysPerHour distinct keys ((limiter, key) of its batches'
// entries, asks, upstream signals and final denials) and
// Options.TokenIsolatesPerHour distinct isolate ids in an hour of the
// coordinator's clock (hours start on the hour). A batch that takes its
// token past either is refused 429 urn:edgelimit:problem:quota, nothing of
// it applied, and so is every later batch of the token until the hour
// ends (Retry-After says when); the token's edges decide by their fail
// policy meanwhile. Other tokens are not touched. The first refusal of a
// token in an hour is logged (its scope, not the token).
//
// Over Redis (the shared mode) an isolate leaves a sequence mark in every
// bucket its batches write to, up to --redis-buckets of them (512), so a
// token's isolate ids alone did not bound what it adds: one token naming
// 512 keys of a token bucket under ~1,000 new isolate ids, far under both
// quotas, filled a 64 MB Redis in about 10 s with marks that live a day,
// and every other token's syncs then failed (OOM) for as long. There
// Options.TokenMarksPerHour also bounds the distinct (isolate, bucket)
// pairs a token's batches name in an hour.
//
// What it bounds: every key record and isolate mark in the store is made
// by a batch that names it, so a token adds at most the quota's records
// in an hour. Before, one token made ~220,000 new keys a second, and over
// Redis filled 256 MB in 18 s: every token's syncs then failed until the
// records expired. A record lives its limiter's period and a grace after
// its last write (about 2.7 h for a window of an hour), an isolate mark a
// day, so what a token can hold in the store is about the quota times
// those lives in hours. The counts are each coordinator's own (in memory,
// from its start): behind N coordinators a token may name N times the
// quota. Counted with a HyperLogLog sketch (internal/distinct: 8 KiB per
// token, 1.6% standard error), so a token is refused within a few percent
// of its quota. Without tokens (one trusted fleet) nothing is counted.

// Defaults of the quotas (Options).
const (
	// DefaultTokenKeysPerHour is Options.TokenKeysPerHour's default:
	// 1,000,000 distinct keys per token per hour.
	DefaultTokenKeysPerHour = 1_000_000
	// DefaultTokenIsolatesPerHour is Options.TokenIsolatesPerHour's
	// default: 100,000 distinct isolate ids per token per hour.
	DefaultTokenIsolatesPerHour = 100_000
	// DefaultTokenMarksPerHour is Options.TokenMarksPerHour's default:
	// 1,000,000 distinct (isolate, bucket) pairs per token per hour (a
	// fleet of 64 isolates writing to all 512 buckets names 32,768 per
	// start).
	DefaultTokenMarksPerHour = 1_000_000
)

// ErrQuota marks a batch refused for its token's quota (a *QuotaError).
var ErrQuota = errors.New("coordinator: token over its quota")

// QuotaError is a batch refused because its token named more distinct keys
// or isolate ids this hour than its quota. Nothing of it was applied; the
// token's batches are refused until Until. It matches ErrQuota.
type QuotaError struct {
	What  string    // "keys", "isolates" or "marks"
	Quota int       // distinct What per hour
	Until time.Time // the end of the hour
}

// Error says what the token exceeded and until when.
func (e *QuotaError) Error() string {
	flag := map[string]string{"keys": "--token-keys", "isolates": "--token-isolates", "marks": "--token-marks"}[e.What]
	what := e.What
	if what == "marks" {
		what = "(isolate, Redis bucket) pairs"
	}
	return fmt.Sprintf("coordinator: this token named more than %d distinct %s this hour (its quota): its batches are refused until %s (a fleet that needs more: the coordinator's %s)",
		e.Quota, what, e.Until.UTC().Format(time.RFC3339), flag)
}

// Is makes errors.Is(err, ErrQuota) hold.
func (e *QuotaError) Is(target error) bool { return target == ErrQuota }

// quotas counts what each token names (see above).
type quotas struct {
	keys, isolates, marks int // per hour; negative: none
	log                   *slog.Logger
	seed                  maphash.Seed
	mu                    sync.Mutex
	by                    map[string]*tokenCount // by scope
}

// tokenCount is one token's count in the current hour.
type tokenCount struct {
	mu                sync.Mutex
	hour              int64 // hours since the Unix epoch
	keys, isos, marks *distinct.Counter
	said              bool // its refusal this hour was logged
}

func newQuotas(keys, isolates, marks int, log *slog.Logger) *quotas {
	return &quotas{keys: keys, isolates: isolates, marks: marks, log: log, seed: maphash.MakeSeed(), by: map[string]*tokenCount{}}
}

// count returns the count of scope, made on first use (one per token the
// coordinator accepts: as many as it was configured with).
func (q *quotas) count(scope string) *tokenCount {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.by[scope]
	if t == nil {
		t = &tokenCount{hour: -1, keys: distinct.New(q.seed), isos: distinct.New(q.seed), marks: distinct.New(q.seed)}
		q.by[scope] = t
	}
	return t
}

// admit counts what b names for the token of scope at now (ns) and returns a
// *QuotaError when the token is past a quota this hour. Without a scope
// (no tokens) it counts nothing. bucket, in the shared mode (else nil),
// gives the Redis bucket of a (limiter, key): the marks quota counts the
// (isolate, bucket) pairs.
func (q *quotas) admit(scope string, b *wire.Batch, now int64, bucket func(limiter, key string) int) error {
	if scope == "" || (q.keys < 0 && q.isolates < 0 && (q.marks < 0 || bucket == nil)) {
		return nil
	}
	t := q.count(scope)
	t.mu.Lock()
	defer t.mu.Unlock()
	hour := now / int64(time.Hour)
	if hour != t.hour {
		t.hour, t.said = hour, false
		t.keys.Reset()
		t.isos.Reset()
		t.marks.Reset()
	}
	if q.isolates >= 0 {
		t.isos.Add("", b.Isolate)
	}
	marks := q.marks >= 0 && bucket != nil
	var seen map[int]bool // the buckets of b counted for its isolate
	if marks {
		seen = map[int]bool{}
	}
	batchKeys(b, func(limiter, key string) {
		if q.keys >= 0 {
			t.keys.Add(limiter, key)
		}
		if !marks {
			return
		}
		if k := bucket(limiter, key); !seen[k] {
			seen[k] = true
			t.marks.Add(b.Isolate, strconv.Itoa(k))
		}
	})
	var e *QuotaError
	switch until := time.Unix(0, (hour+1)*int64(time.Hour)); {
	case q.keys >= 0 && t.keys.Estimate() > float64(q.keys):
		e = &QuotaError{What: "keys", Quota: q.keys, Until: until}
	case q.isolates >= 0 && t.isos.Estimate() > float64(q.isolates):
		e = &QuotaError{What: "isolates", Quota: q.isolates, Until: until}
	case marks && t.marks.Estimate() > float64(q.marks):
		e = &QuotaError{What: "marks", Quota: q.marks, Until: until}
	default:
		return nil
	}
	if !t.said {
		t.said = true
		q.log.Warn("coordinator: a token is over its quota: its batches are refused 429 until the hour ends",
			"scope", scope, "what", e.What, "quota_per_hour", e.Quota, "until", e.Until.UTC().Format(time.RFC3339))
	}
	return e
}

// batchKeys calls fn with the (limiter, key) of every item of b: its
// entries, asks, final denials and upstream signals.
func batchKeys(b *wire.Batch, fn func(limiter, key string)) {
	for i := range b.Entries {
		fn(b.Entries[i].Limiter, b.Entries[i].Key)
	}
	for _, kcs := range [...][]wire.KeyCost{b.Asks, b.Denials} {
		for i := range kcs {
			fn(kcs[i].Limiter, kcs[i].Key)
		}
	}
	for i := range b.Signals {
		fn(b.Signals[i].Limiter, b.Signals[i].Key)
	}
}
