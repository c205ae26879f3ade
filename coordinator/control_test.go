package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/edgelimit/edgelimit/clock"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/coordinator/pebblestore"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// controlDo sends method path with body (JSON, may be "") and token (may
// be "") to srv and returns the status and body.
func controlDo(t *testing.T, srv *httptest.Server, method, path, body, token string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, srv.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// mustControl is controlDo expecting 200 and a ControlView.
func mustControl(t *testing.T, srv *httptest.Server, method, path, body, token string) *ControlView {
	t.Helper()
	status, out := controlDo(t, srv, method, path, body, token)
	if status != http.StatusOK {
		t.Fatalf("%s %s: status %d: %s", method, path, status, out)
	}
	v := new(ControlView)
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, out)
	}
	return v
}

// withLog sends the coordinator's log to buf (JSON lines).
func withLog(buf *syncBuffer) func(*Options) {
	return func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(buf, nil)) }
}

// limitedBatch is batch with View.Limit asked for (an edge that adopts the
// coordinator's limits).
func limitedBatch(iso string, seq, at int64, entries ...wire.Delta) *wire.Batch {
	b := batch(iso, seq, at, entries...)
	b.Limits = true
	return b
}

// A limit and an override changed through the API are in force for the
// next batch (View.Limit, the key's state, the dashboard), and each change
// is one audit line naming who, old -> new and the reason.
func TestControlSetLimits(t *testing.T) {
	logs := &syncBuffer{}
	c, clk, srv := newTestServer(t, withLog(logs))
	w := clk.now() / sec
	d := func(key string) wire.Delta {
		return wire.Delta{Limiter: "fw", Key: key, Window: w, Delta: 1, Demand: 1}
	}
	rp := mustSync(t, c, limitedBatch("a", 1, clk.now(), d("k"), d("vip")))
	if viewOf(t, rp, "fw", "k").Limit != 100 || viewOf(t, rp, "fw", "vip").Limit != 1000 {
		t.Fatalf("before: %+v", rp.Entries)
	}
	mustControl(t, srv, "PUT", "/v1/limiters/fw/limit", `{"limit": 7, "reason": "upstream quota cut"}`, "")
	v := mustControl(t, srv, "PUT", "/v1/limiters/fw/overrides/vip", `{"limit": 9}`, "")
	if v.Generation != 2 || v.LimitsGeneration != 3 {
		t.Fatalf("generations %d, %d after two changes, want 2 and 3", v.Generation, v.LimitsGeneration)
	}
	if l := v.Limiters[0]; l.Name != "fw" || l.Limit != 7 || l.ConfiguredLimit != 100 || l.Overrides["vip"] != 9 || l.ConfiguredOverrides["vip"] != 1000 || len(l.Changes) != 2 {
		t.Fatalf("control view: %+v", l)
	}
	rp = mustSync(t, c, limitedBatch("a", 2, clk.now(), d("k"), d("vip")))
	if k, vip := viewOf(t, rp, "fw", "k").Limit, viewOf(t, rp, "fw", "vip").Limit; k != 7 || vip != 9 {
		t.Fatalf("after: limits %d and %d, want 7 and 9", k, vip)
	}
	if ks := getKey(t, c, "fw", "k"); ks.Limit != 7 {
		t.Fatalf("key state: limit %d, want 7", ks.Limit)
	}
	_, out := controlDo(t, srv, "GET", "/v1/limiters", "", "")
	if !bytes.Contains(out, []byte(`"name":"fw","algorithm":"fixed_window","mode":"approximate","limit":7`)) {
		t.Errorf("dashboard does not show the new limit: %s", out)
	}
	// Removing the override: the key takes the limiter's limit.
	mustControl(t, srv, "DELETE", "/v1/limiters/fw/overrides/vip?reason=done", "", "")
	rp = mustSync(t, c, limitedBatch("a", 3, clk.now(), d("vip")))
	if l := viewOf(t, rp, "fw", "vip").Limit; l != 7 {
		t.Fatalf("override removed: limit %d, want the limiter's 7", l)
	}
	// Back to the file's value: no run-time change left for fw.
	v = mustControl(t, srv, "PUT", "/v1/limiters/fw/limit", `{"limit": 100}`, "")
	if n := len(v.Limiters[0].Changes); n != 1 { // the override's removal stays
		t.Fatalf("changes after going back to the file's limit: %+v", v.Limiters[0].Changes)
	}
	lines := strings.Count(logs.String(), `"msg":"coordinator: audit: `)
	if lines != 4 {
		t.Fatalf("%d audit lines for 4 changes:\n%s", lines, logs)
	}
	for _, want := range []string{`"msg":"coordinator: audit: limit of limiter \"fw\": 100 -> 7"`, `"by":"anonymous from 127.0.0.1:`,
		`"reason":"upstream quota cut"`, `"msg":"coordinator: audit: limit of limiter \"fw\" key \"vip\": 1000 -> 9"`,
		`"old":"9","new":"no override (7)","reason":"done"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the audit log lacks %s:\n%s", want, logs)
		}
	}
}

// Bad requests are refused with the field or the reason and change
// nothing; only the admin role changes.
func TestControlRefusals(t *testing.T) {
	c, _, srv := newTestServer(t, func(o *Options) {
		o.Grants = []Grant{{Token: "reader", Roles: RoleRead}, {Token: "boss", Roles: RoleAdmin}}
	})
	for _, tc := range []struct {
		method, path, body, token string
		status                    int
		want                      string
	}{
		{"PUT", "/v1/limiters/fw/limit", `{"limit": 7}`, "reader", 403, "lacks the admin role"},
		{"PUT", "/v1/limiters/fw/limit", `{"limit": 7}`, "", 401, "bearer token"},
		{"PUT", "/v1/limiters/fw/limit", `{"limit": 0}`, "boss", 400, "limit must be 1 to"},
		{"PUT", "/v1/limiters/fw/limit", `{"limit": 7, "extra": 1}`, "boss", 400, "unknown field"},
		{"PUT", "/v1/limiters/fw/limit", "{\n\"limit\": 7,\n}", "boss", 400, "line 3"},
		// A field given twice: encoding/json took the last copy (7) silently.
		{"PUT", "/v1/limiters/fw/limit", `{"limit": 5, "limit": 7}`, "boss", 400, `\"limit\" is given twice`},
		{"PUT", "/v1/limiters/nope/limit", `{"limit": 7}`, "boss", 404, "unknown limiter"},
		{"PUT", "/v1/limiters/fw/overrides/k", `{"limit": 0}`, "boss", 400, "DELETE removes"},
		{"POST", "/v1/limiters/fw/pause", `{"for": "10m"}`, "boss", 400, "needs a reason"},
		{"POST", "/v1/limiters/fw/pause", `{"for": "-1m", "reason": "x"}`, "boss", 400, "more than 0"},
		{"POST", "/v1/limiters/fw/pause", `{"for": "31d", "reason": "x"}`, "boss", 400, "at most 720h"},
		{"POST", "/v1/limiters/fw/pause", `{"for": "soon", "reason": "x"}`, "boss", 400, "for must be a duration"},
		{"POST", "/v1/limiters/fw/pause", `{"for": "1m", "reason": "` + strings.Repeat("x", 501) + `"}`, "boss", 400, "at most 500"},
		{"DELETE", "/v1/limiters/fw/pause", "", "boss", 404, "no such pause"},
		{"DELETE", "/v1/limiters/fw/pause/k", "", "boss", 404, "no such pause"},
		{"DELETE", "/v1/limiters/fw/overrides/k", "", "boss", 404, "no such override"},
		{"POST", "/v1/limiters/fw/pause/", `{"for": "1m", "reason": "x"}`, "boss", 400, "keys are 1 to"},
	} {
		status, out := controlDo(t, srv, tc.method, tc.path, tc.body, tc.token)
		if status != tc.status || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s %s %s: %d %s, want %d with %q", tc.method, tc.path, tc.body, status, out, tc.status, tc.want)
		}
	}
	v := mustControl(t, srv, "GET", "/v1/control", "", "reader")
	if v.Generation != 0 || v.LimitsGeneration != 1 || len(v.Pauses) != 0 || v.Limiters[0].Limit != 100 {
		t.Fatalf("refused changes changed the state: %+v", v)
	}
	if _, err := c.Control(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// upPause returns the pause rp tells for (limiter, key), ns (0: none).
func upPause(rp *wire.Reply, limiter, key string) int64 {
	for _, u := range rp.Upstream {
		if u.Limiter == limiter && u.Key == key {
			return u.Pause
		}
	}
	return 0
}

// named reports whether rp's reset notices name (limiter, key).
func named(rp *wire.Reply, limiter, key string) bool {
	for _, r := range rp.Resets {
		if r.Limiter == limiter && r.Key == key {
			return true
		}
	}
	return false
}

// A fleet pause of a limiter or a key is told with every reply that names
// its keys, until it ends or is resumed; a resume sends a reset notice of
// each key told, which lifts the pause at the isolates.
func TestControlPauseResume(t *testing.T) {
	logs := &syncBuffer{}
	c, clk, srv := newTestServer(t, withLog(logs))
	w := clk.now() / sec
	d := func(lim, key string) wire.Delta {
		return wire.Delta{Limiter: lim, Key: key, Window: w, Delta: 1, Demand: 1}
	}
	seqs, gens := map[string]int64{}, map[string]int64{}
	sync := func(iso string, ds ...wire.Delta) *wire.Reply {
		seqs[iso]++
		b := batch(iso, seqs[iso], clk.now(), ds...)
		b.ResetGen = gens[iso]
		if b.ResetGen == 0 {
			b.ResetGen = clk.now() // as if it had heard this coordinator: it gets notices
		}
		rp := mustSync(t, c, b)
		gens[iso] = rp.ResetGen
		return rp
	}
	sync("a", d("fw", "k1"))
	v := mustControl(t, srv, "POST", "/v1/limiters/fw/pause", `{"for": "10m", "reason": "upstream down, INC-7"}`, "")
	if len(v.Pauses) != 1 || v.Pauses[0].Limiter != "fw" || v.Pauses[0].Left != 600*sec || v.Pauses[0].Reason != "upstream down, INC-7" {
		t.Fatalf("pauses: %+v", v.Pauses)
	}
	mustControl(t, srv, "POST", "/v1/limiters/sw/pause/only", `{"for": "1m", "reason": "abuse"}`, "")
	clk.add(sec)
	rp := sync("a", d("fw", "k1"), d("fw", "k2"), d("sw", "only"), d("sw", "other"))
	if p1, p2 := upPause(rp, "fw", "k1"), upPause(rp, "fw", "k2"); p1 != 599*sec || p2 != 599*sec {
		t.Fatalf("limiter pause told %d, %d ns, want 599 s", p1, p2)
	}
	// Every reply names the paused limiter, whichever keys its batch
	// names (a key pause is not a limiter's).
	if rp := sync("b", d("tb", "x")); len(rp.Paused) != 1 || rp.Paused[0].Limiter != "fw" || rp.Paused[0].Left != 599*sec {
		t.Fatalf("a reply to a batch of another limiter: paused %+v, want fw for 599 s", rp.Paused)
	}
	if p, o := upPause(rp, "sw", "only"), upPause(rp, "sw", "other"); p != 59*sec || o != 0 {
		t.Fatalf("key pause told %d (want 59 s) and %d for another key (want 0)", p, o)
	}
	// The metrics say so.
	_, out := controlDo(t, srv, "GET", "/metrics", "", "")
	for _, want := range []string{`edgelimit_coordinator_fleet_paused{limiter="fw"} 1`, `edgelimit_coordinator_fleet_paused{limiter="sw"} 0`,
		`edgelimit_coordinator_fleet_paused_keys{limiter="sw"} 1`, `edgelimit_coordinator_limit{limiter="fw"} 100`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// The key's state shows the fleet pause in force.
	status, out := controlDo(t, srv, "GET", "/v1/limiters/sw/keys/only", "", "")
	if status != 200 || !strings.Contains(string(out), `"fleet_pause":{"limiter":"sw","key":"only",`) || !strings.Contains(string(out), `"reason":"abuse"`) {
		t.Fatalf("key state of a paused key: %d %s", status, out)
	}
	if _, out := controlDo(t, srv, "GET", "/v1/limiters/sw/keys/other", "", ""); strings.Contains(string(out), "fleet_pause") {
		t.Fatalf("key state of a key not paused: %s", out)
	}
	// Resume the limiter: its keys told are noticed, and no longer paused.
	mustControl(t, srv, "DELETE", "/v1/limiters/fw/pause?reason=fixed", "", "")
	rp = sync("a", d("fw", "k3"))
	if len(rp.Paused) != 0 {
		t.Fatalf("after resume: paused %+v, want none", rp.Paused)
	}
	if upPause(rp, "fw", "k3") != 0 || !named(rp, "fw", "k1") || !named(rp, "fw", "k2") {
		t.Fatalf("after resume: up %+v resets %+v, want no pause and notices of k1, k2", rp.Upstream, rp.Resets)
	}
	// The key pause ends by itself.
	clk.add(60 * sec)
	if rp := sync("a", d("sw", "only")); upPause(rp, "sw", "only") != 0 {
		t.Fatalf("an expired pause is still told: %+v", rp.Upstream)
	}
	for _, want := range []string{`coordinator: audit: pause of limiter \"fw\": not paused -> paused for 10m0s`, `"until":"`,
		`"reason":"upstream down, INC-7"`, `pause of limiter \"fw\": paused until`, `-> resumed`, `"reason":"fixed"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the audit log lacks %s:\n%s", want, logs)
		}
	}
}

// Run-time changes and pauses are stored: a restart over the same data
// directory has them in force, but for a change whose value the
// configuration file changed since (the file wins, logged).
func TestControlSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{}
	clk.set(t0)
	open := func(cfg wire.Config, logs *syncBuffer) *Coordinator {
		c, err := Open(Options{Dir: dir, Config: cfg, Clock: clock.Func(clk.now), GCInterval: -1, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	c := open(testConfig(), &syncBuffer{})
	if err := c.SetLimit(ctx, "test", "fw", "", 7, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLimit(ctx, "test", "sw", "", 8, "r2"); err != nil {
		t.Fatal(err)
	}
	if err := c.PauseFleet(ctx, "test", "tb", "k", 600e9, "r3"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	c = open(testConfig(), logs)
	v, err := c.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.Limiters[0].Limit != 7 || v.Limiters[1].Limit != 8 || len(v.Pauses) != 1 || v.Pauses[0].Reason != "r3" || v.Generation != 3 {
		t.Fatalf("after a restart: %+v", v)
	}
	rp := mustSync(t, c, limitedBatch("a", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k", Window: clk.now() / sec, Delta: 1},
		wire.Delta{Limiter: "tb", Key: "k", Delta: 1}))
	if viewOf(t, rp, "fw", "k").Limit != 7 || upPause(rp, "tb", "k") != 600e9 {
		t.Fatalf("after a restart: reply %+v", rp)
	}
	if !strings.Contains(logs.String(), "2 run-time limit changes and 1 pauses from the store in force") {
		t.Errorf("the start does not say what the store put in force:\n%s", logs)
	}
	c.Close()
	// The file now says 50 for fw: its run-time 7 is dropped, sw's 8 stays.
	cfg := testConfig()
	cfg.Limiters[0].Limit = 50
	logs = &syncBuffer{}
	c = open(cfg, logs)
	defer c.Close()
	if v, _ = c.Control(ctx); v.Limiters[0].Limit != 50 || v.Limiters[1].Limit != 8 {
		t.Fatalf("after the file changed: fw %d (want the file's 50), sw %d (want the run-time 8)", v.Limiters[0].Limit, v.Limiters[1].Limit)
	}
	if !strings.Contains(logs.String(), `limiter \"fw\" 7 (the file's value changed from 100 to 50) is dropped`) {
		t.Errorf("the start does not log the dropped change:\n%s", logs)
	}
}

// ReloadConfig (SIGHUP) puts the file's changed limits in force, as the
// API would, keeps the run-time changes of values the file did not change,
// and refuses a file that changes more than limits, or is not valid,
// changing nothing.
func TestControlReloadConfig(t *testing.T) {
	logs := &syncBuffer{}
	c, clk := newTestCoordinator(t, t0, withLog(logs))
	ctx := context.Background()
	if err := c.SetLimit(ctx, "test", "sw", "", 8, ""); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Limiters[0].Limit = 50                                        // fw
	cfg.Limiters[0].Overrides[0].Limit = 2000                         // fw vip
	cfg.Limiters[2].Overrides = []wire.Override{{Key: "k", Limit: 5}} // tb: a new override
	if err := c.ReloadConfig(ctx, cfg, "f.json"); err != nil {
		t.Fatal(err)
	}
	v, _ := c.Control(ctx)
	if v.Limiters[0].Limit != 50 || v.Limiters[0].Overrides["vip"] != 2000 || v.Limiters[1].Limit != 8 || v.Limiters[2].Overrides["k"] != 5 {
		t.Fatalf("after the reload: %+v", v.Limiters)
	}
	rp := mustSync(t, c, limitedBatch("a", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "x", Window: clk.now() / sec, Delta: 1}))
	if l := viewOf(t, rp, "fw", "x").Limit; l != 50 {
		t.Fatalf("after the reload: View.Limit %d, want 50", l)
	}
	for _, want := range []string{`limit of limiter \"fw\": 100 -> 50","by":"config file f.json"`, `limit of limiter \"fw\" key \"vip\": 1000 -> 2000`,
		`limit of limiter \"tb\" key \"k\": 10 -> 5`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the audit log lacks %s:\n%s", want, logs)
		}
	}
	// The file changes sw too: the file wins over the run-time 8.
	cfg.Limiters[1].Limit = 60
	if err := c.ReloadConfig(ctx, cfg, "f.json"); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Control(ctx); v.Limiters[1].Limit != 60 || len(v.Limiters[1].Changes) != 0 {
		t.Fatalf("sw after the file changed it: %+v", v.Limiters[1])
	}
	// Refused: a period, a limiter more, an invalid limit.
	before, _ := c.Control(ctx)
	bad := []func(*wire.Config){
		func(c *wire.Config) { c.Limiters[0].Period = 2 * sec },
		func(c *wire.Config) {
			c.Limiters = append(c.Limiters, wire.LimiterConfig{Name: "new", Algorithm: wire.FixedWindow, Limit: 1, Period: sec})
		},
		func(c *wire.Config) { c.Limiters[0].Limit = 0 },
	}
	for i, mod := range bad {
		b := testConfig()
		mod(&b)
		if err := c.ReloadConfig(ctx, b, "bad.json"); err == nil {
			t.Errorf("bad config %d was reloaded", i)
		}
	}
	if after, _ := c.Control(ctx); after.Generation != before.Generation || after.Limiters[0].Limit != 50 {
		t.Fatalf("refused reloads changed the state: %+v, before %+v", after, before)
	}
}

// A limiter's pause resumed after a restart still lifts the pause of the
// keys told before it: Close stores them with the control record.
func TestControlResumeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{}
	clk.set(t0)
	open := func() *Coordinator {
		c, err := Open(Options{Dir: dir, Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx := context.Background()
	c := open()
	if err := c.PauseFleet(ctx, "test", "fw", "", 600e9, "outage"); err != nil {
		t.Fatal(err)
	}
	w := clk.now() / sec
	d := func(key string) wire.Delta { return wire.Delta{Limiter: "fw", Key: key, Window: w, Delta: 1} }
	rp := mustSync(t, c, batch("a", 1, clk.now(), d("k1"), d("k2")))
	if upPause(rp, "fw", "k1") == 0 || upPause(rp, "fw", "k2") == 0 {
		t.Fatalf("not told: %+v", rp.Upstream)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open()
	defer c.Close()
	// The isolate hears the new process first (ResetAll, its generation).
	b := batch("a", 2, clk.now())
	b.ResetGen = rp.ResetGen
	rp = mustSync(t, c, b)
	if err := c.ResumeFleet(ctx, "test", "fw", "", "over"); err != nil {
		t.Fatal(err)
	}
	b = batch("a", 3, clk.now())
	b.ResetGen = rp.ResetGen
	rp = mustSync(t, c, b)
	if !named(rp, "fw", "k1") || !named(rp, "fw", "k2") {
		t.Fatalf("the resume after a restart noticed %+v (ResetAll %v), want k1 and k2", rp.Resets, rp.ResetAll)
	}
}

// A stored control record that does not decode does not stop the
// coordinator: it logs why, runs on the configuration file's limits, and
// the next change overwrites the record.
func TestControlCorruptRecord(t *testing.T) {
	st, err := pebblestore.Open(vfs.NewMem(), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Commit([]merge.Op{{Key: controlKey, Value: []byte(`{"gen": 3, "limits": [`)}}); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	c, _ := newTestCoordinator(t, t0, func(o *Options) {
		o.Store = st
		o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"coordinator: control: the stored control record is not used`) {
		t.Fatalf("no error logged for the corrupt record:\n%s", logs)
	}
	ctx := context.Background()
	if v, err := c.Control(ctx); err != nil || v.Limiters[0].Limit != 100 {
		t.Fatalf("control state %+v, %v: want the file's limits", v, err)
	}
	if err := c.SetLimit(ctx, "test", "fw", "", 5, ""); err != nil {
		t.Fatal(err)
	}
	b, _, err := st.Get(controlKey)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := decodeControl(b, 0); err != nil || rec.Limits[0].Limit != 5 {
		t.Fatalf("the record after a change: %s, %v", b, err)
	}
}

// BenchmarkDecoratePaused: a batch of 8,192 keys of a limiter under a fleet
// pause (every key's reply view gets the pause): its decoration costs one
// map lookup per key, not a search of the reply's upstream views.
//
//	go test -run '^$' -bench DecoratePaused ./coordinator/
func BenchmarkDecoratePaused(b *testing.B) {
	c, clk := newTestCoordinator(b, t0, nil)
	if err := c.PauseFleet(context.Background(), "bench", "fw", "", time.Hour, "bench"); err != nil {
		b.Fatal(err)
	}
	es := make([]wire.Delta, wire.MaxBatchEntries)
	for i := range es {
		es[i] = wire.Delta{Limiter: "fw", Key: fmt.Sprintf("key-%d", i), Window: clk.now() / sec, Delta: 1}
	}
	rp := mustSync(b, c, batch("x", 1, clk.now(), es...))
	b.ResetTimer()
	for range b.N {
		r := *rp
		r.Upstream = nil
		c.ctl.decorate(&wire.Batch{Entries: es}, &r, clk.now())
		if len(r.Upstream) != len(es) {
			b.Fatalf("%d upstream views, want %d", len(r.Upstream), len(es))
		}
	}
}

// A limiter's resume sends no reset notice of a key still paused on its
// own: the notice made the edge forget the key's pause with the
// limiter's, and an approximate edge admitted the key until its next
// reply told it again (9 of 265 requests in a probe).
func TestLimiterResumeKeepsKeyPauses(t *testing.T) {
	c, clk, srv := newTestServer(t, nil)
	w := clk.now() / sec
	seq := int64(0)
	sync := func(ds ...wire.Delta) *wire.Reply {
		seq++
		b := batch("a", seq, clk.now(), ds...)
		b.ResetGen = clk.now() // as if it had heard this coordinator: it gets notices
		return mustSync(t, c, b)
	}
	d := func(key string) wire.Delta {
		return wire.Delta{Limiter: "fw", Key: key, Window: w, Delta: 1, Demand: 1}
	}
	mustControl(t, srv, "POST", "/v1/limiters/fw/pause/own", `{"for": "5m", "reason": "abuse"}`, "")
	mustControl(t, srv, "POST", "/v1/limiters/fw/pause", `{"for": "10m", "reason": "outage"}`, "")
	clk.add(sec)
	sync(d("own"), d("other")) // both told, with the limiter's pause
	mustControl(t, srv, "DELETE", "/v1/limiters/fw/pause?reason=back", "", "")
	rp := sync(d("third"))
	if named(rp, "fw", "own") || !named(rp, "fw", "other") {
		t.Fatalf("after the limiter's resume: resets %+v; want other noticed and own, still paused, not", rp.Resets)
	}
	if rp = sync(d("own")); upPause(rp, "fw", "own") <= 0 {
		t.Fatalf("the key's own pause is not told after the limiter's resume: %+v", rp.Upstream)
	}
}
