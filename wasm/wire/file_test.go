//go:build !wasip1

package wire_test

// Tests of file.go (the JSON configuration file and the helpers the host
// packages use), which is not built for the guest: like file.go, this file
// is left out of GOOS=wasip1 builds, so `GOOS=wasip1 go vet ./wasm/...`
// checks the rest.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

func TestLimitFor(t *testing.T) {
	l := wire.LimiterConfig{Name: "x", Algorithm: wire.TokenBucket, Limit: 10, Period: 1e9,
		Overrides: []wire.Override{{Key: "vip", Limit: 100}}}
	if l.LimitFor("vip") != 100 || l.LimitFor("other") != 10 {
		t.Errorf("LimitFor: vip %d, other %d; want 100, 10", l.LimitFor("vip"), l.LimitFor("other"))
	}
}

func TestParseConfigJSON(t *testing.T) {
	c, err := wire.ParseConfigJSON([]byte(`{"limiters": [
	  {"name": "llm", "algorithm": "fixed_window", "limit": 6, "period": "1s"},
	  {"name": "customer", "algorithm": "sliding_window", "limit": 100, "period": "1m",
	   "mode": "strict", "overrides": {"zeta": 5, "acme": 1000}}
	], "max_keys": 5000}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != wire.Version || c.MaxKeys != 5000 || len(c.Limiters) != 2 || c.Limiters[1].Period != 60e9 ||
		len(c.Limiters[1].Overrides) != 2 || c.Limiters[1].Overrides[0].Key != "acme" {
		t.Errorf("parsed %+v", c)
	}
	if c.Limiter("customer") != &c.Limiters[1] || c.Limiter("none") != nil {
		t.Error("Limiter lookup")
	}
	for _, bad := range []string{
		`{"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 1, "period": "1w"}]}`,
		`{"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 1, "period": "1s", "extra": 1}]}`,
		`{"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 0, "period": "1s"}]}`,
		`{"limiters": []}`,
		`not json`,
	} {
		if _, err := wire.ParseConfigJSON([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// TestFailPolicyJSON: the fail policy is read from the JSON file, and a bad
// one is an error naming its field.
func TestFailPolicyJSON(t *testing.T) {
	fc, err := wire.ParseConfigJSON([]byte(`{"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 1, "period": "1s", "fail_policy": "local-share"}]}`))
	if err != nil || fc.Limiters[0].FailPolicy != wire.FailLocalShare {
		t.Errorf("JSON fail_policy: %+v, %v", fc, err)
	}
	if _, err := wire.ParseConfigJSON([]byte(`{"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 1, "period": "1s", "fail_policy": "shut"}]}`)); err == nil ||
		!strings.Contains(err.Error(), "limiters[0].fail_policy") {
		t.Errorf("JSON bad fail_policy: %v", err)
	}
}

// The config file's default mode is auto (leases when synced); a host
// whose isolates never sync runs auto limiters as approximate, and refuses
// strict and read-through ones, which would deny every request.
func TestFileDefaultModeAuto(t *testing.T) {
	c, err := wire.ParseConfigJSON([]byte(`{"limiters": [
		{"name": "a", "algorithm": "fixed_window", "limit": 5, "period": "1s"},
		{"name": "s", "algorithm": "fixed_window", "limit": 5, "period": "1s", "mode": "strict"},
		{"name": "x", "algorithm": "fixed_window", "limit": 5, "period": "1s", "mode": "approximate"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Limiters[0].Mode; m != wire.Auto || !c.Limiters[0].Leased() {
		t.Fatalf("omitted mode: %q, want auto (leased)", m)
	}
	if c.Limiters[2].Leased() {
		t.Fatal("approximate is leased")
	}
	// Alone, a strict limiter would deny everything: refused, naming it.
	if _, err := c.Alone(); err == nil || !strings.Contains(err.Error(), `limiter "s" is strict`) {
		t.Fatalf("alone with a strict limiter: %v, want an error naming it", err)
	}
	rt := c
	rt.Limiters = []wire.LimiterConfig{c.Limiters[0], c.Limiters[2]}
	rt.Limiters[1].ReadThrough = true
	if _, err := rt.Alone(); err == nil || !strings.Contains(err.Error(), `limiter "x" is read-through`) {
		t.Fatalf("alone with a read-through limiter: %v, want an error naming it", err)
	}
	rt.Limiters[1].ReadThrough = false
	alone, err := rt.Alone()
	if err != nil || !alone.Standalone || alone.Limiters[0].Mode != wire.Approximate || alone.Limiters[1].Mode != wire.Approximate || c.Limiters[0].Mode != wire.Auto {
		t.Fatalf("alone: %+v, %v (original %+v)", alone.Limiters, err, c.Limiters)
	}
	// A wire Config's empty mode stays approximate (the module's zero value).
	if (&wire.LimiterConfig{}).Leased() {
		t.Fatal("empty wire mode is leased")
	}
}

func TestParseDurationDays(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"1s": time.Second, "24h": 24 * time.Hour, "1d": 24 * time.Hour, "1.5d": 36 * time.Hour,
		"30d": 720 * time.Hour, "1d12h": 36 * time.Hour, "-2d": -48 * time.Hour, "0d": 0, "0": 0,
	} {
		if got, err := wire.ParseDuration(s); err != nil || got != want {
			t.Errorf("wire.ParseDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	// Well-formed but too large: said so.
	for _, s := range []string{"2562048h", "10000000d", "9999999999999999999ns", "106752d1h"} {
		if _, err := wire.ParseDuration(s); err == nil || !strings.Contains(err.Error(), "too large") {
			t.Errorf("wire.ParseDuration(%q): %v, want too large", s, err)
		}
	}
	for _, s := range []string{"", "d", "1w", "1d-1h", "xd", "1e3d", "1dd", "1d 1h", "1h2x"} {
		if _, err := wire.ParseDuration(s); err == nil || !strings.Contains(err.Error(), "24h = 1d") {
			t.Errorf("wire.ParseDuration(%q): %v, want an error with the hint", s, err)
		}
	}
}

// A period in days is read; a bad one, and a JSON syntax or type error,
// say where.
func TestConfigFileDaysAndErrorPositions(t *testing.T) {
	c, err := wire.ParseConfigJSON([]byte(`{"limiters": [{"name": "d", "algorithm": "fixed_window", "limit": 5, "period": "1d"}]}`))
	if err != nil || c.Limiters[0].Period != int64(24*time.Hour) {
		t.Fatalf("1d: %v, %+v", err, c)
	}
	for doc, want := range map[string]string{
		"{\"limiters\": [\n  {\"name\": \"a\",\n   \"limit\": 5,, }]}": "line 3, column 15: invalid character ','",
		"{\"limiters\": [\n  {\"name\": \"a\", \"limit\": \"five\"}]}": "line 2, column 31: json: cannot unmarshal string",
		"{\"limiters\": [\n  {\"name\": \"a\"":                         "line 2, column 15: unexpected EOF",
		"{\"limiters\": [{\"period\": \"1w\"}]}":                       "24h = 1d",
	} {
		_, err := wire.ParseConfigJSON([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
}

// A configuration file is one JSON object, read with a bound: what follows
// the object (a second document, a stray brace of an edit) is refused,
// naming where (the edge host and a coordinator's SIGHUP reload ignored it,
// while the coordinator's start refused it); a UTF-8 byte order mark is
// skipped; an empty file and one past MaxConfigFileBytes are refused
// naming the problem ("EOF" before; a 90 MB file took 1.5 GB to refuse).
func TestConfigFileIsOneBoundedObject(t *testing.T) {
	dir := t.TempDir()
	lims := `{"limiters": [{"name": "a", "algorithm": "fixed_window", "limit": 5, "period": "1s"}]}`
	for name, tc := range map[string]struct{ body, want string }{
		"trailing": {lims + "\n garbage", "line 2, column 2: data after the configuration's JSON object"},
		"two docs": {lims + lims, "data after the configuration's JSON object"},
		"bom":      {"\xef\xbb\xbf" + lims, ""},
		"spaces":   {lims + "\n\n", ""},
		"empty":    {" \n", "the file is empty"},
		"huge":     {lims + strings.Repeat(" ", wire.MaxConfigFileBytes), "larger than"},
		"limiters": {`{"limiters": [` + strings.Repeat(`{"name": "", "limit": -1},`, 300) + `{}]}`, "limiters: 301 limiters, at most 256"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := wire.LoadConfigFile(p)
		switch {
		case tc.want == "" && (err != nil || len(c.Limiters) != 1):
			t.Errorf("%s: %v, want the limiter", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}
