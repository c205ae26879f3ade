package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestNewRefusesWhatCouldNeverWork: a host whose options could only fail
// later without a word is refused at start, naming the cause: a strict or
// read-through limiter without a coordinator (it would deny every request
// while its window has room: seen as 0 of 15 admitted on a limit of 10),
// and a token no HTTP client can send (every sync would fail). The same
// limiters with a coordinator, and an auto one without, start.
func TestNewRefusesWhatCouldNeverWork(t *testing.T) {
	lim := func(name, mode string, readThrough bool) wire.LimiterConfig {
		return wire.LimiterConfig{Name: name, Algorithm: wire.FixedWindow, Limit: 10, Period: int64(time.Second), Mode: mode, ReadThrough: readThrough}
	}
	cfg := func(ls ...wire.LimiterConfig) wire.Config { return wire.Config{Version: wire.Version, Limiters: ls} }
	for _, c := range []struct {
		name string
		opts Options
		want string // "" starts
	}{
		{"strict alone", Options{Config: cfg(lim("a", wire.Auto, false), lim("s", wire.Strict, false))}, `limiter "s" is strict`},
		{"read-through alone", Options{Config: cfg(lim("r", wire.Approximate, true))}, `limiter "r" is read-through`},
		{"auto alone", Options{Config: cfg(lim("a", wire.Auto, false))}, ""},
		{"strict with a coordinator", Options{Config: cfg(lim("s", wire.Strict, false), lim("r", wire.Approximate, true)), Coordinator: "http://" + deadAddr(t)}, ""},
		{"token with a newline", Options{Config: cfg(lim("a", wire.Auto, false)), Coordinator: "http://" + deadAddr(t), Token: "secret\n"}, "host: Options.Token: wire: bad bearer token: byte 7 of 7 is 0xa"},
		{"token past ASCII", Options{Config: cfg(lim("a", wire.Auto, false)), Coordinator: "http://" + deadAddr(t), Token: "secr€t"}, "bad bearer token"},
	} {
		c.opts.Isolates = 1
		h, err := New(context.Background(), c.opts)
		if err == nil {
			h.Close()
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want a host", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "host: ")):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
