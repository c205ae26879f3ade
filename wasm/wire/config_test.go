package wire_test

import (
	"errors"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// fieldsOf lists the fields named by the errors joined in err.
func fieldsOf(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var fields []string
	for _, e := range errs {
		var fe *wire.FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("error %q is not a FieldError", e)
		}
		if !strings.Contains(e.Error(), `"`+fe.Field+`"`) {
			t.Errorf("message %q does not name its field", e)
		}
		fields = append(fields, fe.Field)
	}
	sort.Strings(fields)
	return fields
}

func validLimiter(name string) wire.LimiterConfig {
	return wire.LimiterConfig{Name: name, Algorithm: wire.FixedWindow, Limit: 10, Period: 1e9}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	c := wire.Config{
		Version:   2,
		IsolateID: strings.Repeat("i", wire.MaxIsolateIDLen+1),
		MaxKeys:   -1,
		Limiters: []wire.LimiterConfig{
			validLimiter("ok"),
			{Name: "", Algorithm: "leaky", Limit: 0, Period: wire.MinPeriod - 1, Burst: -1, Mode: "eventual",
				Overrides: []wire.Override{{Key: "", Limit: 0}, {Key: strings.Repeat("k", 257), Limit: wire.MaxLimit + 1}}},
			validLimiter("ok"), // duplicate
			{Name: strings.Repeat("n", wire.MaxNameLen+1), Algorithm: wire.GCRA, Limit: wire.MaxLimit + 1, Period: wire.MaxPeriod + 1, Burst: wire.MaxLimit + 1},
		},
	}
	got := fieldsOf(t, c.Validate())
	want := []string{
		"iso", "limiters[1].algorithm", "limiters[1].burst", "limiters[1].limit", "limiters[1].mode",
		"limiters[1].name", "limiters[1].overrides[0].key", "limiters[1].overrides[0].limit",
		"limiters[1].overrides[1].key", "limiters[1].overrides[1].limit", "limiters[1].period",
		"limiters[2].name", "limiters[3].burst", "limiters[3].limit", "limiters[3].name", "limiters[3].period",
		"max_keys", "v",
	}
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Validate reported\n%v\nwant\n%v", got, want)
	}
	// The messages say what is wrong.
	msg := c.Validate().Error()
	for _, s := range []string{"duplicate limiter name \"ok\"", "unknown algorithm \"leaky\"", "unknown mode \"eventual\"", "version 2"} {
		if !strings.Contains(msg, s) {
			t.Errorf("messages lack %q:\n%s", s, msg)
		}
	}
	// Decoding validates too, with the same errors.
	var back wire.Config
	err := back.UnmarshalMsg(c.AppendMsg(nil))
	if g := fieldsOf(t, err); strings.Join(g, ",") != strings.Join(want, ",") {
		t.Errorf("UnmarshalMsg reported %v", g)
	}
}

func TestConfigValidateBounds(t *testing.T) {
	base := func() wire.Config {
		return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{validLimiter("a")}}
	}
	ok := []func(*wire.Config){
		func(c *wire.Config) {},
		func(c *wire.Config) { c.MaxKeys = 1 << 24 },
		func(c *wire.Config) { c.IsolateID = strings.Repeat("i", wire.MaxIsolateIDLen) },
		func(c *wire.Config) { c.Limiters[0].Period = wire.MinPeriod },
		func(c *wire.Config) { c.Limiters[0].Period = wire.MaxPeriod },
		func(c *wire.Config) { c.Limiters[0].Limit, c.Limiters[0].Burst = wire.MaxLimit, wire.MaxLimit },
		func(c *wire.Config) { c.Limiters[0].Name = strings.Repeat("n", wire.MaxNameLen) },
		func(c *wire.Config) { c.Limiters[0].Mode = wire.Strict },
		func(c *wire.Config) {
			c.Limiters[0].Overrides = []wire.Override{{Key: strings.Repeat("k", wire.MaxKeyLen), Limit: 1}}
		},
		func(c *wire.Config) {
			for i := 1; i < wire.MaxLimiters; i++ {
				c.Limiters = append(c.Limiters, validLimiter("l"+strconv.Itoa(i)))
			}
		},
	}
	for i, f := range ok {
		c := base()
		f(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("valid case %d: %v", i, err)
		}
		var back wire.Config
		if err := back.UnmarshalMsg(c.AppendMsg(nil)); err != nil {
			t.Errorf("valid case %d does not decode: %v", i, err)
		}
	}
	bad := map[string]func(*wire.Config){
		"max_keys":         func(c *wire.Config) { c.MaxKeys = 1<<24 + 1 },
		"limiters":         func(c *wire.Config) { c.Limiters = nil },
		"limiters[0].mode": func(c *wire.Config) { c.Limiters[0].Mode = "Strict" },
	}
	for field, f := range bad {
		c := base()
		f(&c)
		if got := fieldsOf(t, c.Validate()); len(got) != 1 || got[0] != field {
			t.Errorf("bad %s: reported %v", field, got)
		}
	}
	c := base()
	for i := 1; i <= wire.MaxLimiters; i++ {
		c.Limiters = append(c.Limiters, validLimiter("l"+strconv.Itoa(i)))
	}
	if got := fieldsOf(t, c.Validate()); len(got) != 1 || got[0] != "limiters" {
		t.Errorf("%d limiters: %v", len(c.Limiters), got)
	}
	var back wire.Config
	if err := back.UnmarshalMsg(c.AppendMsg(nil)); err == nil {
		t.Errorf("%d limiters decoded", len(c.Limiters))
	}
}

func TestEffectiveBurst(t *testing.T) {
	l := wire.LimiterConfig{Name: "x", Algorithm: wire.TokenBucket, Limit: 10, Period: 1e9, Burst: 3,
		Overrides: []wire.Override{{Key: "vip", Limit: 100}}}
	if l.EffectiveBurst(10) != 3 || l.EffectiveBurst(100) != 100 {
		t.Errorf("EffectiveBurst: %d %d", l.EffectiveBurst(10), l.EffectiveBurst(100))
	}
	l.Burst = 0
	if l.EffectiveBurst(10) != 10 {
		t.Errorf("EffectiveBurst with burst 0: %d", l.EffectiveBurst(10))
	}
	if !l.IsBucket() || (&wire.LimiterConfig{Algorithm: wire.SlidingWindow}).IsBucket() {
		t.Error("IsBucket")
	}
}

// TestFailPolicyField: the optional fail policy is validated by name,
// carried through msgpack when set and left out of the
// encoding when empty (the bytes of a config without it are unchanged, so
// modules built before the field decode it).
func TestFailPolicyField(t *testing.T) {
	for _, p := range []string{"", wire.FailOpen, wire.FailClosed, wire.FailLocalShare} {
		c := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{validLimiter("a")}}
		c.Limiters[0].FailPolicy = p
		if err := c.Validate(); err != nil {
			t.Errorf("fail policy %q: %v", p, err)
		}
		var back wire.Config
		if err := back.UnmarshalMsg(c.AppendMsg(nil)); err != nil || back.Limiters[0].FailPolicy != p {
			t.Errorf("fail policy %q round trip: %q, %v", p, back.Limiters[0].FailPolicy, err)
		}
	}
	c := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{validLimiter("a")}}
	if b := c.AppendMsg(nil); strings.Contains(string(b), "fail_policy") {
		t.Error("an empty fail policy is encoded")
	}
	c.Limiters[0].FailPolicy = "half-open"
	if got := fieldsOf(t, c.Validate()); strings.Join(got, ",") != "limiters[0].fail_policy" {
		t.Errorf("bad fail policy reported as %v", got)
	}
	if err := c.Validate(); !strings.Contains(err.Error(), `unknown fail policy "half-open"`) {
		t.Errorf("message %q", err)
	}
	var back wire.Config
	if got := fieldsOf(t, back.UnmarshalMsg(c.AppendMsg(nil))); strings.Join(got, ",") != "limiters[0].fail_policy" {
		t.Errorf("decoding a bad fail policy reported %v", got)
	}
}
