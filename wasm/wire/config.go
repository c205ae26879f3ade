package wire

import (
	"errors"
	"strconv"
)

// Algorithm names accepted in LimiterConfig.Algorithm.
const (
	FixedWindow   = "fixed_window"   // count per aligned window of Period
	SlidingWindow = "sliding_window" // two-window approximation of a sliding log
	TokenBucket   = "token_bucket"   // Limit tokens per Period, capacity Burst
	GCRA          = "gcra"           // generic cell rate algorithm, tolerance Burst
)

// Mode names accepted in LimiterConfig.Mode.
const (
	// Auto admits within leases from the coordinator like Strict, sized
	// per key and isolate by demand: a busy isolate holds leases ahead
	// (and a standing lease for the next window) and decides locally, a
	// sparse one asks when it needs budget. It is the default of the
	// JSON config file (FileConfig: an omitted mode); hosts whose
	// isolates never sync run it as Approximate (Config.Alone).
	Auto = "auto"
	// Approximate decides from the cached global view and an estimate of
	// the other isolates' traffic; the default of a wire Config whose
	// Mode is empty.
	Approximate = "approximate"
	Strict      = "strict" // admit only within a lease from the coordinator
)

// Leased reports whether the limiter admits only within leases (Auto or
// Strict).
func (l *LimiterConfig) Leased() bool { return l.Mode == Strict || l.Mode == Auto }

// Alone returns c for isolates that never sync with a coordinator: Auto
// limiters become Approximate (leases would never come). A Strict limiter
// or a read-through one is an error naming it: it admits only within
// leases, or asks the coordinator for a cold key, so alone it would deny
// every request while its window has room.
func (c Config) Alone() (Config, error) {
	c.Limiters = append([]LimiterConfig(nil), c.Limiters...)
	c.Standalone = true
	for i := range c.Limiters {
		l := &c.Limiters[i]
		switch {
		case l.Mode == Strict:
			return c, errors.New("wire: limiter " + strconv.Quote(l.Name) + " is strict: it admits only within leases from a coordinator, and there is none (give a coordinator, or make it approximate or auto)")
		case l.ReadThrough:
			return c, errors.New("wire: limiter " + strconv.Quote(l.Name) + " is read-through: a cold key asks a coordinator, and there is none (give a coordinator, or drop read_through)")
		case l.Mode == Auto:
			l.Mode = Approximate
		}
	}
	return c, nil
}

// Fail policy names accepted in LimiterConfig.FailPolicy: what an isolate
// does with a limiter's requests once its view of the global counts is
// stale (the coordinator has not answered for the host's stale bound).
// Package edge/failpolicy implements them for the edge host and the
// simulator; the module itself does not read the field.
const (
	FailOpen       = "open"        // decide from the last view, as if fresh
	FailClosed     = "closed"      // deny every request
	FailLocalShare = "local-share" // admit up to limit/isolates per window per key, then ask the module too
)

// LimiterConfig is one named limiter.
//
// The msgpack tags give the field names of the encoding (AppendMsg), so a Go
// host may encode it with msgpack/v5 too (SCHEMA.md).
type LimiterConfig struct {
	Name      string `msgpack:"name"`      // unique name, 1..MaxNameLen bytes
	Algorithm string `msgpack:"algorithm"` // FixedWindow, SlidingWindow, TokenBucket or GCRA
	Limit     int64  `msgpack:"limit"`     // admitted cost per Period, >= 1
	Period    int64  `msgpack:"period_ns"` // nanoseconds, MinPeriod..MaxPeriod
	Burst     int64  `msgpack:"burst"`     // token_bucket/gcra: capacity; 0 means Limit
	Mode      string `msgpack:"mode"`      // Approximate (default when empty), Strict or Auto
	// ReadThrough (approximate mode): a decision on a cold key (no global
	// view of its current window, no rate estimate) is denied with
	// SyncRetry so the host syncs and decides again: one round trip for
	// sparse keys, none for busy ones. Default false.
	ReadThrough bool       `msgpack:"read_through"`
	Overrides   []Override `msgpack:"overrides,omitempty"` // per-key limits replacing Limit; a key with an override has capacity = its limit (Burst applies to Limit only); at most MaxOverrides
	// FailPolicy is FailOpen, FailClosed or FailLocalShare; empty (the
	// default) leaves the choice to the host (`edgelimit edge
	// --fail-policy`, default open). Encoded only when set.
	FailPolicy string `msgpack:"fail_policy,omitempty"`
	// Upstream says how the limiter follows what its upstream answers
	// (pauses, announced quotas, the circuit); nil means the defaults.
	// Encoded only when set.
	Upstream *UpstreamConfig `msgpack:"upstream,omitempty"`
}

// Override replaces a limiter's limit for one key; encoded as the array
// [key, limit].
type Override struct {
	//lint:ignore U1000 read by msgpack/v5 (reflection): encode as an array
	_msgpack struct{} `msgpack:",as_array"`
	Key      string
	Limit    int64 // >= 1
}

// Config is the configuration of an isolate (and of the coordinator and the
// simulator, which read the same limiters).
type Config struct {
	Version   int64           `msgpack:"v"`
	IsolateID string          `msgpack:"iso"`      // names the isolate in sync batches; unique per instance
	MaxKeys   int64           `msgpack:"max_keys"` // cap on keys tracked; 0 means DefaultMaxKeys
	Limiters  []LimiterConfig `msgpack:"limiters,omitempty"`
	// Standalone: the isolate never syncs (set by Config.Alone); a
	// half-open circuit then probes on its own instead of asking the
	// coordinator. Encoded only when set.
	Standalone bool `msgpack:"alone,omitempty"`
	// IsolateSecret is the incarnation's secret, MinSecretLen to
	// MaxSecretLen bytes, chosen at random by the host for each
	// incarnation (a new one with each new isolate id): every batch
	// carries it (Batch.Secret), and the coordinator refuses a batch for
	// the isolate id without it (see Batch.Secret). Empty: batches carry
	// none and the isolate's id is not protected. Encoded only when set.
	IsolateSecret string `msgpack:"secret,omitempty"`
	// SyncInterval is the host's sync interval, ns (0: DefaultSyncInterval,
	// 100 ms; else MinSyncInterval..MaxSyncInterval). The isolate trusts a
	// denial it cached for two intervals after its last reply: past that,
	// a request it would deny from the cache asks for a sync first
	// (SyncRetry), so a reset on the coordinator reaches it within two
	// intervals (core/resets.go). Encoded only when set.
	SyncInterval int64 `msgpack:"sync_ns,omitempty"`
	// Heartbeat is the longest the isolate goes without a batch, ns: with
	// nothing to report for that long it cuts an empty one (at the host's
	// next sync), so the coordinator tells an idle isolate from a dead one.
	// 0 (the default): none, an idle isolate sends nothing (Workers, which
	// sync only during requests, cannot send one). Else MinSyncInterval..
	// MaxSyncInterval. Encoded only when set.
	Heartbeat int64 `msgpack:"heartbeat_ns,omitempty"`
}

// EffectiveBurst returns the bucket capacity for a limit: Burst, or limit when Burst is 0.
func (l *LimiterConfig) EffectiveBurst(limit int64) int64 {
	if l.Burst > 0 && limit == l.Limit {
		return l.Burst
	}
	return limit
}

// IsBucket reports whether the algorithm keeps a bucket (token_bucket, gcra)
// rather than windowed counts.
func (l *LimiterConfig) IsBucket() bool { return l.Algorithm == TokenBucket || l.Algorithm == GCRA }

// Validate reports every problem in c, one joined error, or nil.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, &FieldError{Field: field, Err: errors.New(msg)}) }
	if c.Version != Version {
		bad("v", "version "+strconv.FormatInt(c.Version, 10)+" is not supported (want "+strconv.Itoa(Version)+")")
	}
	if len(c.IsolateID) > MaxIsolateIDLen {
		bad("iso", "isolate id longer than "+strconv.Itoa(MaxIsolateIDLen)+" bytes")
	}
	if c.IsolateSecret != "" && !ValidSecret(c.IsolateSecret) {
		bad("secret", errSecretLen)
	}
	if c.MaxKeys < 0 || c.MaxKeys > 1<<24 {
		bad("max_keys", "must be between 0 (default) and 16777216")
	}
	if c.SyncInterval != 0 && (c.SyncInterval < MinSyncInterval || c.SyncInterval > MaxSyncInterval) {
		bad("sync_ns", "must be 0 (default: 100ms) or between 1ms and 1h (in ns), got "+strconv.FormatInt(c.SyncInterval, 10))
	}
	if c.Heartbeat != 0 && (c.Heartbeat < MinSyncInterval || c.Heartbeat > MaxSyncInterval) {
		bad("heartbeat_ns", "must be 0 (none) or between 1ms and 1h (in ns), got "+strconv.FormatInt(c.Heartbeat, 10))
	}
	if len(c.Limiters) == 0 {
		bad("limiters", "at least one limiter is required")
	}
	if len(c.Limiters) > MaxLimiters {
		bad("limiters", "more than "+strconv.Itoa(MaxLimiters)+" limiters")
	}
	seen := map[string]bool{}
	for i := range c.Limiters {
		l := &c.Limiters[i]
		p := "limiters[" + strconv.Itoa(i) + "]."
		if l.Name == "" || len(l.Name) > MaxNameLen {
			bad(p+"name", "must be 1 to "+strconv.Itoa(MaxNameLen)+" bytes")
		} else if seen[l.Name] {
			bad(p+"name", "duplicate limiter name "+quote(l.Name))
		}
		seen[l.Name] = true
		switch l.Algorithm {
		case FixedWindow, SlidingWindow, TokenBucket, GCRA:
		default:
			bad(p+"algorithm", "unknown algorithm "+quote(l.Algorithm)+
				" (want fixed_window, sliding_window, token_bucket or gcra)")
		}
		if l.Limit < 1 || l.Limit > MaxLimit {
			bad(p+"limit", "must be between 1 and 2^50, got "+strconv.FormatInt(l.Limit, 10))
		}
		if l.Period < MinPeriod || l.Period > MaxPeriod {
			bad(p+"period", "must be between 1ms and 31 days (in ns), got "+strconv.FormatInt(l.Period, 10))
		}
		if l.Burst < 0 || l.Burst > MaxLimit {
			bad(p+"burst", "must be between 0 (= limit) and 2^50")
		}
		switch l.Mode {
		case "", Auto, Approximate, Strict:
		default:
			bad(p+"mode", "unknown mode "+quote(l.Mode)+" (want auto, approximate or strict)")
		}
		switch l.FailPolicy {
		case "", FailOpen, FailClosed, FailLocalShare:
		default:
			bad(p+"fail_policy", "unknown fail policy "+quote(l.FailPolicy)+" (want open, closed or local-share)")
		}
		if len(l.Overrides) > MaxOverrides {
			bad(p+"overrides", "more than "+strconv.Itoa(MaxOverrides)+" overrides")
		}
		if l.Upstream != nil {
			l.Upstream.validate(p+"upstream.", bad)
		}
		for j, o := range l.Overrides {
			q := p + "overrides[" + strconv.Itoa(j) + "]."
			if o.Key == "" || len(o.Key) > MaxKeyLen {
				bad(q+"key", "must be 1 to "+strconv.Itoa(MaxKeyLen)+" bytes")
			}
			if o.Limit < 1 || o.Limit > MaxLimit {
				bad(q+"limit", "must be between 1 and 2^50")
			}
		}
	}
	return errors.Join(errs...)
}

// AppendMsg appends c encoded as msgpack.
func (c *Config) AppendMsg(b []byte) []byte {
	n := 4
	if c.Standalone {
		n++
	}
	if c.IsolateSecret != "" {
		n++
	}
	if c.SyncInterval != 0 {
		n++
	}
	if c.Heartbeat != 0 {
		n++
	}
	b = AppendMapHeader(b, n)
	if c.Standalone {
		b = AppendString(b, "alone")
		b = AppendBool(b, true)
	}
	if c.IsolateSecret != "" {
		b = AppendString(b, "secret")
		b = AppendString(b, c.IsolateSecret)
	}
	if c.SyncInterval != 0 {
		b = AppendString(b, "sync_ns")
		b = AppendInt(b, c.SyncInterval)
	}
	if c.Heartbeat != 0 {
		b = AppendString(b, "heartbeat_ns")
		b = AppendInt(b, c.Heartbeat)
	}
	b = AppendString(b, "v")
	b = AppendInt(b, c.Version)
	b = AppendString(b, "iso")
	b = AppendString(b, c.IsolateID)
	b = AppendString(b, "max_keys")
	b = AppendInt(b, c.MaxKeys)
	b = AppendString(b, "limiters")
	b = AppendArrayHeader(b, len(c.Limiters))
	for i := range c.Limiters {
		l := &c.Limiters[i]
		n := 8
		if l.FailPolicy != "" {
			n++
		}
		if l.Upstream != nil {
			n++
		}
		b = AppendMapHeader(b, n)
		if l.FailPolicy != "" {
			b = AppendString(b, "fail_policy")
			b = AppendString(b, l.FailPolicy)
		}
		if l.Upstream != nil {
			b = AppendString(b, "upstream")
			b = l.Upstream.appendMsg(b)
		}
		b = AppendString(b, "name")
		b = AppendString(b, l.Name)
		b = AppendString(b, "algorithm")
		b = AppendString(b, l.Algorithm)
		b = AppendString(b, "limit")
		b = AppendInt(b, l.Limit)
		b = AppendString(b, "period_ns")
		b = AppendInt(b, l.Period)
		b = AppendString(b, "burst")
		b = AppendInt(b, l.Burst)
		b = AppendString(b, "mode")
		b = AppendString(b, l.Mode)
		b = AppendString(b, "read_through")
		b = AppendBool(b, l.ReadThrough)
		b = AppendString(b, "overrides")
		b = AppendArrayHeader(b, len(l.Overrides))
		for _, o := range l.Overrides {
			b = AppendArrayHeader(b, 2)
			b = AppendString(b, o.Key)
			b = AppendInt(b, o.Limit)
		}
	}
	return b
}

// UnmarshalMsg decodes c from msgpack and validates it.
func (c *Config) UnmarshalMsg(b []byte) error {
	*c = Config{}
	r := NewReader(b)
	for n := r.ReadMapHeader(); n > 0 && r.err == nil; n-- {
		switch string(r.ReadStringBytes()) {
		case "v":
			c.Version = r.ReadInt()
		case "iso":
			c.IsolateID = r.ReadString()
		case "max_keys":
			c.MaxKeys = r.ReadInt()
		case "alone":
			c.Standalone = r.ReadBool()
		case "secret":
			c.IsolateSecret = r.ReadString()
		case "sync_ns":
			c.SyncInterval = r.ReadInt()
		case "heartbeat_ns":
			c.Heartbeat = r.ReadInt()
		case "limiters":
			m := r.ReadArrayHeader()
			if m > MaxLimiters {
				r.SetErr("limiters", errors.New("more than "+strconv.Itoa(MaxLimiters)+" limiters"))
				break
			}
			c.Limiters = make([]LimiterConfig, m)
			for i := 0; i < m && r.err == nil; i++ {
				c.Limiters[i].read(r)
			}
		default:
			r.Skip()
		}
	}
	if err := r.Done(); err != nil {
		return err
	}
	return c.Validate()
}

func (l *LimiterConfig) read(r *Reader) {
	for n := r.ReadMapHeader(); n > 0 && r.err == nil; n-- {
		switch string(r.ReadStringBytes()) {
		case "name":
			l.Name = r.ReadString()
		case "algorithm":
			l.Algorithm = r.ReadString()
		case "limit":
			l.Limit = r.ReadInt()
		case "period_ns":
			l.Period = r.ReadInt()
		case "burst":
			l.Burst = r.ReadInt()
		case "mode":
			l.Mode = r.ReadString()
		case "read_through":
			l.ReadThrough = r.ReadBool()
		case "fail_policy":
			l.FailPolicy = r.ReadString()
		case "upstream":
			l.Upstream = &UpstreamConfig{}
			l.Upstream.read(r)
		case "overrides":
			m := r.ReadArrayHeader()
			if m > MaxOverrides {
				r.SetErr("overrides", errors.New("more than "+strconv.Itoa(MaxOverrides)+" overrides"))
				break
			}
			l.Overrides = make([]Override, 0, m)
			for i := 0; i < m && r.err == nil; i++ {
				if k := r.ReadArrayHeader(); k != 2 && r.err == nil {
					r.SetErr("overrides", errors.New("each override is [key, limit]"))
					break
				}
				o := Override{Key: r.ReadString(), Limit: r.ReadInt()}
				l.Overrides = append(l.Overrides, o)
			}
		default:
			r.Skip()
		}
	}
}
