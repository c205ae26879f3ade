//go:build !wasip1

package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// FileConfig is the JSON configuration file shared by the coordinator, the
// edge host and the simulator. Example:
//
//	{"limiters": [
//	  {"name": "llm", "algorithm": "fixed_window", "limit": 6, "period": "1s"},
//	  {"name": "customer", "algorithm": "sliding_window", "limit": 100, "period": "1m",
//	   "mode": "strict", "overrides": {"acme": 1000}, "fail_policy": "closed"}
//	], "max_keys": 100000,
//	 "coordinator": {"data": "/var/lib/edgelimit", "listen": "0.0.0.0:7070"}}
type FileConfig struct {
	MaxKeys  int64         `json:"max_keys,omitempty"` // 0 means DefaultMaxKeys
	Limiters []FileLimiter `json:"limiters"`
	// Coordinator holds settings of `edgelimit coordinator` by flag name
	// ({"listen": "...", "checkpoint-keys": 65536}); package coordinator
	// reads them, this package only lets them through.
	Coordinator json.RawMessage `json:"coordinator,omitempty"`
}

// FileLimiter is one limiter in a FileConfig; Period is a duration as
// ParseDuration reads it: a Go duration string ("1s", "15m", "24h"), or
// days with "d" ("1d", "30d", "1d12h").
type FileLimiter struct {
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
	Limit     int64  `json:"limit"`
	Period    string `json:"period"`
	Burst     int64  `json:"burst,omitempty"`
	// Mode: "auto" (the default when omitted), "approximate" or
	// "strict"; see LimiterConfig.Mode and the Auto constant.
	Mode string `json:"mode,omitempty"`
	// ReadThrough: see LimiterConfig.ReadThrough.
	ReadThrough bool             `json:"read_through,omitempty"`
	Overrides   map[string]int64 `json:"overrides,omitempty"`
	// FailPolicy: "open", "closed" or "local-share"; see
	// LimiterConfig.FailPolicy. Empty: the host's default.
	FailPolicy string `json:"fail_policy,omitempty"`
	// Upstream: how the limiter follows its upstream's answers; see
	// UpstreamConfig. Omitted: the defaults.
	Upstream *FileUpstream `json:"upstream,omitempty"`
}

// FileUpstream is UpstreamConfig in a FileConfig, durations as
// ParseDuration reads them ("30s", "1h", "1d").
type FileUpstream struct {
	MaxPause        string `json:"max_pause,omitempty"`        // default 1h
	MaxLimit        int64  `json:"max_limit,omitempty"`        // default: the limit (announcements only lower it)
	CircuitFailures int64  `json:"circuit_failures,omitempty"` // default 5; -1 turns the circuit off
	CircuitOpen     string `json:"circuit_open,omitempty"`     // default 1s
	Follow          string `json:"follow,omitempty"`           // "always", "never"; default: when the answer has no remaining/reset
}

func (fu *FileUpstream) config(i int) (*UpstreamConfig, error) {
	u := &UpstreamConfig{MaxLimit: fu.MaxLimit, CircuitFailures: fu.CircuitFailures, Follow: fu.Follow}
	for _, d := range []struct {
		name string
		s    string
		dst  *int64
	}{{"max_pause", fu.MaxPause, &u.MaxPause}, {"circuit_open", fu.CircuitOpen, &u.CircuitOpen}} {
		if d.s == "" {
			continue
		}
		v, err := ParseDuration(d.s)
		if err != nil {
			return nil, fmt.Errorf("wire: config: limiters[%d].upstream.%s: %w", i, d.name, err)
		}
		*d.dst = int64(v)
	}
	return u, nil
}

// ParseConfigJSON parses and validates a JSON configuration file's bytes.
func ParseConfigJSON(data []byte) (Config, error) {
	var fc FileConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return Config{}, fmt.Errorf("wire: config: %w", LocateJSONError(data, dec.InputOffset(), err))
	}
	if err := RepeatedJSONKey(data); err != nil {
		return Config{}, fmt.Errorf("wire: config: %w", err)
	}
	// One document: what follows it (a second object, a stray brace left
	// by an edit) was ignored, where the coordinator's start refused it.
	if rest := bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return Config{}, fmt.Errorf("wire: config: %w", LocateJSONError(data, int64(len(data)-len(rest)),
			errors.New("data after the configuration's JSON object")))
	}
	return fc.Config()
}

// MaxConfigFileBytes bounds a configuration file (ReadConfigFile): 32 MiB,
// far past 256 limiters of 4,096 overrides of the longest keys' JSON.
const MaxConfigFileBytes = 32 << 20

// ReadConfigFile returns the bytes of the configuration file at path,
// without a UTF-8 byte order mark (editors on Windows write one; JSON
// refused it as "invalid character 'ï'"). A file larger than
// MaxConfigFileBytes is refused before it is read (a 90 MB file took
// 1.5 GB and 15 s to refuse).
func ReadConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wire: config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("wire: config: %s: %w", path, err)
	}
	if len(data) > MaxConfigFileBytes {
		return nil, fmt.Errorf("wire: config: %s: larger than %d bytes", path, MaxConfigFileBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("wire: config: %s: the file is empty (want {\"limiters\": [...]})", path)
	}
	return bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), nil
}

// JSONPosError is a JSON decoding error with the line and column (both
// from 1, the column in bytes) where it was found.
type JSONPosError struct {
	Line, Column int
	Err          error
}

// Error prefixes the decoding error with its line and column.
func (e *JSONPosError) Error() string {
	return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Column, e.Err)
}

// Unwrap returns the decoding error.
func (e *JSONPosError) Unwrap() error { return e.Err }

// LocateJSONError returns err, an error from decoding the JSON document
// data, as a *JSONPosError: at the offending byte of a *json.SyntaxError,
// the last byte of the value of a *json.UnmarshalTypeError, at the end of data for an unexpected
// end, else at off (the decoder's InputOffset; -1 when unknown, and then
// err is returned as it is). A nil err stays nil.
func LocateJSONError(data []byte, off int64, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		off = se.Offset - 1 // the offending byte
	case errors.As(err, &te):
		off = te.Offset - 1 // the value's last byte
	case errors.Is(err, io.ErrUnexpectedEOF):
		off = int64(len(data))
	}
	if off < 0 {
		return err
	}
	off = min(off, int64(len(data)))
	line, col := 1, 1
	for _, c := range data[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &JSONPosError{Line: line, Column: col, Err: err}
}

// ParseDuration is time.ParseDuration that also reads days: a leading
// "Nd" (N a decimal number, a day 24 hours) followed by nothing or by a Go
// duration ("1d", "1.5d", "30d", "1d12h", "-2d"). Its errors say how to
// write one ("24h" or "1d").
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimPrefix(strings.TrimPrefix(t, "-"), "+")
	var days float64
	hasDays := false
	if i := strings.IndexByte(t, 'd'); i > 0 {
		hasDays = true
		n, err := strconv.ParseFloat(t[:i], 64)
		if err != nil || n < 0 || strings.ContainsAny(t[:i], "eEinfINF_xX") {
			return 0, durationError(s)
		}
		days, t = n, t[i+1:]
	}
	var rest time.Duration
	if t != "" || !hasDays {
		var err error
		if rest, err = time.ParseDuration(t); err != nil || (hasDays && strings.ContainsAny(t[:1], "+-")) {
			if err != nil && strings.Contains(err.Error(), "invalid duration") && overflows(t) {
				return 0, durationRangeError(s)
			}
			return 0, durationError(s)
		}
	}
	const maxDays = float64(1<<63-1) / float64(24*time.Hour)
	if days > maxDays {
		return 0, durationRangeError(s)
	}
	d := time.Duration(days*float64(24*time.Hour)) + rest
	if d < rest {
		return 0, durationRangeError(s)
	}
	if neg {
		d = -d
	}
	return d, nil
}

// overflows reports whether t has the form of a Go duration (numbers,
// each with a unit) that time.ParseDuration refused: its value is too
// large (it says "invalid duration" for both).
func overflows(t string) bool {
	if t == "" {
		return false
	}
	for t != "" {
		i := 0
		for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
			i++
		}
		if i == 0 {
			return false
		}
		t = t[i:]
		j := 0
		for j < len(t) && !(t[j] >= '0' && t[j] <= '9' || t[j] == '.') {
			j++
		}
		switch t[:j] {
		case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
		default:
			return false
		}
		t = t[j:]
	}
	return true
}

// durationRangeError is the error of ParseDuration for a well-formed s
// too large for a duration (about 292 years).
func durationRangeError(s string) error {
	return fmt.Errorf("invalid duration %q: too large (at most about 292 years, 2562047h)", s)
}

// durationError is the error of ParseDuration for s.
func durationError(s string) error {
	return fmt.Errorf("invalid duration %q: want a number and a unit: ns, us, ms, s, m, h or d (24h = 1d), e.g. 500ms, 10s, 1h30m, 7d", s)
}

// LoadConfigFile reads and validates a JSON configuration file.
func LoadConfigFile(path string) (Config, error) {
	data, err := ReadConfigFile(path)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfigJSON(data)
	if err != nil {
		return Config{}, fmt.Errorf("%w (in %s)", err, path)
	}
	return c, nil
}

// Config converts fc to the wire Config and validates it.
func (fc *FileConfig) Config() (Config, error) {
	c := Config{Version: Version, MaxKeys: fc.MaxKeys}
	if len(fc.Limiters) > MaxLimiters {
		// Said once, before each limiter's own problems (200,000 bad
		// limiters printed 14 MB of errors).
		return Config{}, fmt.Errorf("wire: config: limiters: %d limiters, at most %d", len(fc.Limiters), MaxLimiters)
	}
	for i, fl := range fc.Limiters {
		d, err := ParseDuration(fl.Period)
		if err != nil {
			return Config{}, fmt.Errorf("wire: config: limiters[%d].period: %w", i, err)
		}
		if fl.Burst != 0 && fl.Algorithm != TokenBucket && fl.Algorithm != GCRA {
			return Config{}, fmt.Errorf("wire: config: limiters[%d].burst: only token_bucket and gcra have a burst (a %s admits its limit per window)", i, fl.Algorithm)
		}
		mode := fl.Mode
		if mode == "" {
			mode = Auto // the file's default mode
		}
		l := LimiterConfig{Name: fl.Name, Algorithm: fl.Algorithm, Limit: fl.Limit,
			Period: int64(d), Burst: fl.Burst, Mode: mode, ReadThrough: fl.ReadThrough, FailPolicy: fl.FailPolicy}
		if fl.Upstream != nil {
			if l.Upstream, err = fl.Upstream.config(i); err != nil {
				return Config{}, err
			}
		}
		keys := make([]string, 0, len(fl.Overrides))
		for k := range fl.Overrides {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			l.Overrides = append(l.Overrides, Override{Key: k, Limit: fl.Overrides[k]})
		}
		c.Limiters = append(c.Limiters, l)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("wire: config: %w", err)
	}
	return c, nil
}

// Limiter returns the limiter named name, or nil.
func (c *Config) Limiter(name string) *LimiterConfig {
	for i := range c.Limiters {
		if c.Limiters[i].Name == name {
			return &c.Limiters[i]
		}
	}
	return nil
}

// LimitFor returns the limit of limiter l for key, applying overrides.
func (l *LimiterConfig) LimitFor(key string) int64 {
	for _, o := range l.Overrides {
		if o.Key == key {
			return o.Limit
		}
	}
	return l.Limit
}
