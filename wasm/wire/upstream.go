package wire

import (
	"errors"
	"strconv"
)

// Upstream feedback: what the API behind a limiter answered (a 429 with
// Retry-After, its quota headers, failures) travels from the isolate that
// saw it to the coordinator (Batch.Signals) and from there to every isolate
// that shares the key (Reply.Upstream). See SCHEMA.md.

// Defaults of UpstreamConfig.
const (
	// DefaultMaxPause caps a pause an upstream asks for (Retry-After, or a
	// quota at 0 until its reset) when UpstreamConfig.MaxPause is 0: one
	// hour, whatever the limiter's period (a longer pause needs
	// upstream.max_pause).
	DefaultMaxPause = int64(3600e9)
	// DefaultCircuitFailures is how many consecutive upstream failures
	// open a key's circuit when UpstreamConfig.CircuitFailures is 0.
	DefaultCircuitFailures = 5
	// DefaultCircuitOpen is the first time a circuit stays open when
	// UpstreamConfig.CircuitOpen is 0 (1 s); it doubles with each failed
	// probe up to MaxCircuitDoublings times, with jitter.
	DefaultCircuitOpen = int64(1e9)
	// MaxCircuitDoublings bounds the circuit's backoff: at most
	// CircuitOpen x 2^6.
	MaxCircuitDoublings = 6
)

// UpstreamConfig says how a limiter follows what its upstream API answers.
// The zero value is the defaults. Encoded only when set (Config.AppendMsg).
type UpstreamConfig struct {
	// MaxPause caps a pause the upstream asks for, ns; 0 means
	// DefaultMaxPause (1 h).
	MaxPause int64 `msgpack:"max_pause_ns"`
	// MaxLimit is the highest limit an announced quota may set; 0 means
	// the configured Limit: announcements may lower the limit, never
	// raise it above the configuration.
	MaxLimit int64 `msgpack:"max_limit"`
	// CircuitFailures is how many consecutive failures (5xx without
	// Retry-After, transport errors) open the key's circuit; 0 means
	// DefaultCircuitFailures, -1 turns the circuit off.
	CircuitFailures int64 `msgpack:"circuit_failures"`
	// CircuitOpen is the first time the circuit stays open, ns; 0 means
	// DefaultCircuitOpen.
	CircuitOpen int64 `msgpack:"circuit_open_ns"`
	// Follow says when an announced limit becomes the key's limit:
	// FollowAuto (the default, empty), FollowAlways or FollowNever.
	// Encoded only when set.
	Follow string `msgpack:"follow,omitempty"`
}

// UpstreamConfig.Follow values. With FollowAuto an announced limit is
// followed when the answer carries no live counters (remaining and reset):
// with them, the pause until the upstream's reset already enforces its own
// windows, and its limit imposed on the limiter's windows (which start at
// another phase) would only cost throughput (see the README's upstream
// section for the measured figures).
const (
	FollowAuto   = ""
	FollowAlways = "always"
	FollowNever  = "never"
)

// PauseCap returns the longest pause a limiter honours, ns: its
// upstream.max_pause, or DefaultMaxPause (1 h).
func (l *LimiterConfig) PauseCap() int64 {
	if l.Upstream != nil && l.Upstream.MaxPause > 0 {
		return l.Upstream.MaxPause
	}
	return DefaultMaxPause
}

// AnnouncedCap returns the highest limit an announced quota may set for a
// key whose configured limit is limit.
func (l *LimiterConfig) AnnouncedCap(limit int64) int64 {
	if l.Upstream != nil && l.Upstream.MaxLimit > limit {
		return l.Upstream.MaxLimit
	}
	return limit
}

// CircuitThreshold returns the consecutive failures that open a circuit,
// or 0 when the circuit is off.
func (l *LimiterConfig) CircuitThreshold() int64 {
	switch {
	case l.Upstream == nil || l.Upstream.CircuitFailures == 0:
		return DefaultCircuitFailures
	case l.Upstream.CircuitFailures < 0:
		return 0
	}
	return l.Upstream.CircuitFailures
}

// FollowAnnounced reports whether an announced limit becomes the key's
// limit, for an answer that carried live counters (remaining and reset) or
// not.
func (l *LimiterConfig) FollowAnnounced(counters bool) bool {
	f := FollowAuto
	if l.Upstream != nil {
		f = l.Upstream.Follow
	}
	return f == FollowAlways || f == FollowAuto && !counters
}

// CircuitBase returns the first open time of a circuit, ns.
func (l *LimiterConfig) CircuitBase() int64 {
	if l.Upstream != nil && l.Upstream.CircuitOpen > 0 {
		return l.Upstream.CircuitOpen
	}
	return DefaultCircuitOpen
}

func (u *UpstreamConfig) validate(p string, bad func(field, msg string)) {
	if u.MaxPause < 0 || u.MaxPause > MaxPeriod*12 {
		bad(p+"max_pause", "must be between 0 (the default) and 372 days")
	}
	if u.MaxLimit < 0 || u.MaxLimit > MaxLimit {
		bad(p+"max_limit", "must be between 0 (the limit) and 2^50")
	}
	if u.CircuitFailures < -1 || u.CircuitFailures > 1<<20 {
		bad(p+"circuit_failures", "must be -1 (off), 0 (the default) or a count up to 2^20")
	}
	if u.CircuitOpen < 0 || u.CircuitOpen > MaxPeriod {
		bad(p+"circuit_open", "must be between 0 (the default) and 31 days")
	}
	switch u.Follow {
	case FollowAuto, FollowAlways, FollowNever:
	default:
		bad(p+"follow", "unknown value "+quote(u.Follow)+" (want always, never, or empty for auto)")
	}
}

func (u *UpstreamConfig) appendMsg(b []byte) []byte {
	if u.Follow != "" {
		b = AppendMapHeader(b, 5)
		b = AppendString(b, "follow")
		b = AppendString(b, u.Follow)
	} else {
		b = AppendMapHeader(b, 4)
	}
	b = AppendString(b, "max_pause_ns")
	b = AppendInt(b, u.MaxPause)
	b = AppendString(b, "max_limit")
	b = AppendInt(b, u.MaxLimit)
	b = AppendString(b, "circuit_failures")
	b = AppendInt(b, u.CircuitFailures)
	b = AppendString(b, "circuit_open_ns")
	return AppendInt(b, u.CircuitOpen)
}

func (u *UpstreamConfig) read(r *Reader) {
	for n := r.ReadMapHeader(); n > 0 && r.err == nil; n-- {
		switch string(r.ReadStringBytes()) {
		case "max_pause_ns":
			u.MaxPause = r.ReadInt()
		case "max_limit":
			u.MaxLimit = r.ReadInt()
		case "circuit_failures":
			u.CircuitFailures = r.ReadInt()
		case "circuit_open_ns":
			u.CircuitOpen = r.ReadInt()
		case "follow":
			u.Follow = r.ReadString()
		default:
			r.Skip()
		}
	}
}

// Circuit states of a key (UpView.Circuit, Observed.Circuit).
const (
	CircuitClosed   = 0 // requests flow
	CircuitOpen     = 1 // the upstream failed: requests are denied until the open time ends
	CircuitHalfOpen = 2 // one probe at a time across the fleet tells whether the upstream is back
)

// Signal is what one isolate tells the coordinator about one key's
// upstream since its previous batch, encoded as the array [limiter, key,
// pause, failures, successes, limit, probe].
type Signal struct {
	//lint:ignore U1000 read by msgpack/v5 (reflection): encode as an array
	_msgpack struct{} `msgpack:",as_array"`
	Limiter  string
	Key      string
	// Pause is how long after the batch's At the upstream asked to pause
	// the key, ns (0: no pause).
	Pause int64
	// Failures is the consecutive failures observed after the last
	// success (all of them when Successes is 0).
	Failures int64
	// Successes counts the upstream's successful answers.
	Successes int64
	// Limit is the limit per the limiter's period the upstream announced
	// (0: none).
	Limit int64
	// Probe: the isolate's circuit is half-open and it asks to be the
	// fleet's probe.
	Probe bool
}

// UpView is the coordinator's view of one key's upstream, sent to every
// isolate that syncs the key, encoded as the array [limiter, key, pause,
// circuit, open, probe, limit(, life)].
type UpView struct {
	//lint:ignore U1000 read by msgpack/v5 (reflection): encode as an array
	_msgpack struct{} `msgpack:",as_array"`
	Limiter  string
	Key      string
	Pause    int64 // the key is paused for this long after the reply's At, ns (0: not paused)
	Circuit  int64 // CircuitClosed, CircuitOpen or CircuitHalfOpen
	Open     int64 // CircuitOpen: it stays open this long after the reply's At, ns
	Probe    bool  // CircuitHalfOpen: this isolate is the fleet's probe
	Limit    int64 // the limit the fleet's upstream announced, agreed by several isolates (0: none)
	// Life is how long after the reply's At Limit holds unless a later
	// reply says otherwise, ns (the coordinator forgets the reports it
	// rests on then). 0: not said (7 elements on the wire; an older
	// coordinator, or an isolate that never sent a reset generation):
	// the isolate keeps the limit for the report horizon, max(10
	// periods, 60 s).
	Life int64
}

// AppendSignal appends one Signal.
func AppendSignal[K string | []byte](dst []byte, limiter string, key K, pause, failures, successes, limit int64, probe bool) []byte {
	dst = AppendArrayHeader(dst, 7)
	dst = AppendString(dst, limiter)
	dst = AppendString(dst, key)
	dst = AppendInt(dst, pause)
	dst = AppendInt(dst, failures)
	dst = AppendInt(dst, successes)
	dst = AppendInt(dst, limit)
	return AppendBool(dst, probe)
}

// AppendMsg appends s as its array.
func (s *Signal) AppendMsg(dst []byte) []byte {
	return AppendSignal(dst, s.Limiter, s.Key, s.Pause, s.Failures, s.Successes, s.Limit, s.Probe)
}

// AppendMsg appends v as its array.
func (v *UpView) AppendMsg(dst []byte) []byte {
	n := 7
	if v.Life != 0 { // a negative life too (which a module refuses): what is given is written
		n = 8
	}
	dst = AppendArrayHeader(dst, n)
	dst = AppendString(dst, v.Limiter)
	dst = AppendString(dst, v.Key)
	dst = AppendInt(dst, v.Pause)
	dst = AppendInt(dst, v.Circuit)
	dst = AppendInt(dst, v.Open)
	dst = AppendBool(dst, v.Probe)
	dst = AppendInt(dst, v.Limit)
	if n == 8 {
		dst = AppendInt(dst, v.Life)
	}
	return dst
}

func readSignals(r *Reader) []Signal {
	m := r.ReadArrayHeader()
	if m > MaxBatchEntries {
		r.SetErr("up", errors.New(strconv.Itoa(m)+" signals, more than "+strconv.Itoa(MaxBatchEntries)))
		return nil
	}
	if !r.fits(m, 8) { // [limiter, key, pause, failures, successes, limit, probe]: 8 bytes at least
		return nil
	}
	out := make([]Signal, m)
	for i := 0; i < m && r.err == nil; i++ {
		if r.ReadArrayHeader() != 7 && r.err == nil {
			r.SetErr("up["+strconv.Itoa(i)+"]", errors.New("want [limiter, key, pause, failures, successes, limit, probe]"))
			break
		}
		s := &out[i]
		s.Limiter, s.Key = r.ReadString(), r.ReadString()
		s.Pause, s.Failures, s.Successes, s.Limit = r.ReadInt(), r.ReadInt(), r.ReadInt(), r.ReadInt()
		s.Probe = r.ReadBool()
	}
	return out
}

// readUpView decodes one UpView; the limiter and key bytes are returned
// (valid until the input is reused), not stored in v.
func readUpView(r *Reader, v *UpView) (limiter, key []byte) {
	n := r.ReadArrayHeader()
	if (n < 7 || n > 8) && r.err == nil {
		r.SetErr("up", errors.New("want [limiter, key, pause, circuit, open, probe, limit(, life)]"))
		return nil, nil
	}
	limiter, key = r.ReadStringBytes(), r.ReadStringBytes()
	v.Pause, v.Circuit, v.Open = r.ReadInt(), r.ReadInt(), r.ReadInt()
	v.Probe = r.ReadBool()
	v.Limit = r.ReadInt()
	v.Life = 0
	if n == 8 {
		v.Life = r.ReadInt()
	}
	return limiter, key
}

func validateSignals(sigs []Signal) error {
	for i := range sigs {
		s := &sigs[i]
		f := "up[" + strconv.Itoa(i) + "]."
		switch {
		case s.Limiter == "" || len(s.Limiter) > MaxNameLen:
			return &FieldError{f + "limiter", errors.New("must be 1 to " + strconv.Itoa(MaxNameLen) + " bytes")}
		case s.Key == "" || len(s.Key) > MaxKeyLen:
			return &FieldError{f + "key", errKeyLen}
		case s.Pause < 0 || s.Pause > MaxPeriod*12:
			return &FieldError{f + "pause", errors.New("must be between 0 and 372 days")}
		case s.Failures < 0 || s.Failures > MaxLimit:
			return &FieldError{f + "failures", errors.New("must be between 0 and 2^50")}
		case s.Successes < 0 || s.Successes > MaxLimit:
			return &FieldError{f + "successes", errors.New("must be between 0 and 2^50")}
		case s.Limit < 0 || s.Limit > MaxLimit:
			return &FieldError{f + "limit", errors.New("must be between 0 and 2^50")}
		}
	}
	return nil
}

// Observation is the input of the module's observe call: what the upstream
// answered to a request of (Limiter, Key) at Now. Status 0 is a transport
// failure (no answer). Headers are [name, value] pairs, names in any case.
type Observation struct {
	Version int64       `msgpack:"v"`
	Limiter string      `msgpack:"limiter"`
	Key     string      `msgpack:"key"`
	Now     int64       `msgpack:"now"`    // ns, the clock decisions use
	Status  int64       `msgpack:"status"` // HTTP status; 0: no answer (transport failure)
	Headers [][2]string `msgpack:"h,omitempty"`
	// Local: apply here only, report nothing to the coordinator (a host
	// running several isolates gives the answer to each and lets one
	// report it). Encoded only when set.
	Local bool `msgpack:"local,omitempty"`
}

// MaxHeaders bounds an Observation's headers; MaxHeaderLen one name or
// value, in bytes.
const (
	MaxHeaders   = 64
	MaxHeaderLen = 1024
)

// Observed is the result of observe: the key's upstream state after it.
type Observed struct {
	Paused  int64  `msgpack:"paused_ns"`         // the key is paused for this long from now, ns (0: not paused)
	Circuit int64  `msgpack:"circuit"`           // CircuitClosed, CircuitOpen or CircuitHalfOpen
	Limit   int64  `msgpack:"limit"`             // the key's limit now (the configured one unless a quota was announced)
	Sync    bool   `msgpack:"sync"`              // the isolate asks for an early sync (tell the fleet)
	Ignored string `msgpack:"ignored,omitempty"` // why header values were ignored ("; "-separated), empty when none
}

// AppendMsg appends o encoded as msgpack.
func (o *Observation) AppendMsg(b []byte) []byte {
	if o.Local {
		b = AppendMapHeader(b, 7)
		b = AppendString(b, "local")
		b = AppendBool(b, true)
	} else {
		b = AppendMapHeader(b, 6)
	}
	b = AppendString(b, "v")
	b = AppendInt(b, o.Version)
	b = AppendString(b, "limiter")
	b = AppendString(b, o.Limiter)
	b = AppendString(b, "key")
	b = AppendString(b, o.Key)
	b = AppendString(b, "now")
	b = AppendInt(b, o.Now)
	b = AppendString(b, "status")
	b = AppendInt(b, o.Status)
	b = AppendString(b, "h")
	b = AppendArrayHeader(b, len(o.Headers))
	for _, h := range o.Headers {
		b = AppendArrayHeader(b, 2)
		b = AppendString(b, h[0])
		b = AppendString(b, h[1])
	}
	return b
}

// UnmarshalMsg decodes and bounds an observation (header values are checked
// by the core, which ignores bad ones).
func (o *Observation) UnmarshalMsg(src []byte) error {
	*o = Observation{}
	r := NewReader(src)
	for n := r.ReadMapHeader(); n > 0 && r.err == nil; n-- {
		switch string(r.ReadStringBytes()) {
		case "v":
			o.Version = r.ReadInt()
		case "limiter":
			o.Limiter = r.ReadString()
		case "key":
			o.Key = r.ReadString()
		case "now":
			o.Now = r.ReadInt()
		case "status":
			o.Status = r.ReadInt()
		case "local":
			o.Local = r.ReadBool()
		case "h":
			m := r.ReadArrayHeader()
			if m > MaxHeaders {
				r.SetErr("h", errors.New("more than "+strconv.Itoa(MaxHeaders)+" headers"))
				break
			}
			o.Headers = make([][2]string, m)
			for i := 0; i < m && r.err == nil; i++ {
				if r.ReadArrayHeader() != 2 && r.err == nil {
					r.SetErr("h", errors.New("each header is [name, value]"))
					break
				}
				o.Headers[i][0], o.Headers[i][1] = r.ReadString(), r.ReadString()
			}
		default:
			r.Skip()
		}
	}
	if err := r.Done(); err != nil {
		return err
	}
	switch {
	case o.Status < 0 || o.Status > 999:
		return &FieldError{"status", errors.New("must be 0 (no answer) or an HTTP status")}
	case o.Now < 0:
		return &FieldError{"now", errors.New("must be >= 0")}
	}
	for i, h := range o.Headers {
		if len(h[0]) > MaxHeaderLen || len(h[1]) > MaxHeaderLen {
			return &FieldError{"h[" + strconv.Itoa(i) + "]", errors.New("longer than " + strconv.Itoa(MaxHeaderLen) + " bytes")}
		}
	}
	return nil
}

// AppendMsg appends o encoded as msgpack.
func (o *Observed) AppendMsg(b []byte) []byte {
	n := 4
	if o.Ignored != "" {
		n++
	}
	b = AppendMapHeader(b, n)
	b = AppendString(b, "paused_ns")
	b = AppendInt(b, o.Paused)
	b = AppendString(b, "circuit")
	b = AppendInt(b, o.Circuit)
	b = AppendString(b, "limit")
	b = AppendInt(b, o.Limit)
	b = AppendString(b, "sync")
	b = AppendBool(b, o.Sync)
	if o.Ignored != "" {
		b = AppendString(b, "ignored")
		b = AppendString(b, o.Ignored)
	}
	return b
}

// UnmarshalMsg decodes o.
func (o *Observed) UnmarshalMsg(src []byte) error {
	*o = Observed{}
	r := NewReader(src)
	for n := r.ReadMapHeader(); n > 0 && r.err == nil; n-- {
		switch string(r.ReadStringBytes()) {
		case "paused_ns":
			o.Paused = r.ReadInt()
		case "circuit":
			o.Circuit = r.ReadInt()
		case "limit":
			o.Limit = r.ReadInt()
		case "sync":
			o.Sync = r.ReadBool()
		case "ignored":
			o.Ignored = r.ReadString()
		default:
			r.Skip()
		}
	}
	return r.Done()
}
