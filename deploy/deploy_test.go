// Package deploy_test checks the files of deploy/ against what the
// programs export: every metric the Grafana dashboard
// (grafana/edgelimit.json) and the alert rules (prometheus/alerts.yml)
// name, with the labels their selectors match on, is one a live
// coordinator or edge host serves on GET /metrics. The rules' own
// behaviour is tested by promtool (make test-rules).
package deploy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// exported maps each series name a live coordinator and edge host serve to
// the label names it carries (histograms as their _bucket, _sum and
// _count series). Prometheus adds job and instance at scrape time.
type exported map[string]map[string]bool

var seriesLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? `)
var labelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)

func (e exported) add(t *testing.T, text string) {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		m := seriesLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		ls := e[m[1]]
		if ls == nil {
			ls = map[string]bool{"job": true, "instance": true}
			e[m[1]] = ls
		}
		for _, l := range labelName.FindAllStringSubmatch(m[2], -1) {
			ls[l[1]] = true
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// liveSeries starts a coordinator and an edge host syncing to it on
// loopback, makes one decision, waits for a sync, and returns what both
// export.
func liveSeries(t *testing.T) exported {
	t.Helper()
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "llm", Algorithm: wire.FixedWindow, Limit: 6, Period: int64(time.Second)}}}
	c, err := coordinator.Open(coordinator.Options{InMemory: true, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	csrv := httptest.NewServer(c.Handler())
	t.Cleanup(csrv.Close)
	h, err := host.New(context.Background(), host.Options{Config: cfg, Isolates: 1, Coordinator: csrv.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	hsrv := httptest.NewServer(h.Handler())
	t.Cleanup(hsrv.Close)
	get(t, hsrv.URL+"/v1/decide?limiter=llm&key=user-1")
	deadline := time.Now().Add(10 * time.Second)
	for {
		em, cm := get(t, hsrv.URL+"/metrics"), get(t, csrv.URL+"/metrics")
		if strings.Contains(em, "edgelimit_edge_sync_seconds_bucket") && strings.Contains(cm, `edgelimit_coordinator_admitted_total{limiter="llm"} 1`) {
			e := exported{"up": {"job": true, "instance": true}}
			e.add(t, em)
			e.add(t, cm)
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sync after 10 s:\n%s\n%s", em, cm)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	metricName = regexp.MustCompile(`\b(edgelimit_[a-z0-9_]+|up)\b(\{[^}]*\})?`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)`)
)

// checkExpr checks that expr names at least one exported series and that
// every series it names, and every label its selectors match on, exists.
func checkExpr(t *testing.T, where, expr string, e exported) {
	t.Helper()
	ms := metricName.FindAllStringSubmatch(expr, -1)
	if len(ms) == 0 {
		t.Errorf("%s: %q names no edgelimit series", where, expr)
	}
	for _, m := range ms {
		if m[1] == "up" && m[2] == "" {
			continue // the word, not the series (e.g. in "by (…)" it never is)
		}
		labels, ok := e[m[1]]
		if !ok {
			t.Errorf("%s: %s is not exported by the coordinator or the edge host (expr %q)", where, m[1], expr)
			continue
		}
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			if !labels[l[1]] {
				t.Errorf("%s: %s has no label %q (expr %q)", where, m[1], l[1], expr)
			}
		}
	}
}

// grafanaPanel is the part of a Grafana panel the test reads.
type grafanaPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

// TestGrafanaDashboard: deploy/grafana/edgelimit.json is valid JSON, has
// panels for the limiters, the coordinators and the edge hosts, and every
// expression (and the limiter variable's query) names series the programs
// export, with labels they carry.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/edgelimit.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title      string         `json:"title"`
		UID        string         `json:"uid"`
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("grafana/edgelimit.json: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Fatalf("dashboard without title or uid: %q %q", d.Title, d.UID)
	}
	e := liveSeries(t)
	var exprs, titles []string
	var walk func(ps []grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			titles = append(titles, p.Title)
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				checkExpr(t, "panel "+p.Title+" "+tg.RefID, tg.Expr, e)
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			checkExpr(t, "variable "+v.Name, v.Definition, e)
		}
	}
	// The new per-limiter series and the edge's are on the dashboard.
	all := strings.Join(exprs, "\n")
	for _, want := range []string{"edgelimit_coordinator_admitted_total", "edgelimit_coordinator_denied_total",
		"edgelimit_coordinator_keys_near_limit", "edgelimit_coordinator_keys_at_limit", "edgelimit_coordinator_keys_paused",
		"edgelimit_coordinator_store_healthy", "edgelimit_edge_decisions_total", "edgelimit_edge_view_stale"} {
		if !strings.Contains(all, want) {
			t.Errorf("no panel shows %s", want)
		}
	}
	if len(titles) < 10 || len(slices.Compact(slices.Sorted(slices.Values(titles)))) != len(titles) {
		t.Errorf("panels: want at least 10 with distinct titles, got %q", titles)
	}
}

// TestAlertRulesNameExportedSeries: every series the alert rules name is
// exported, with the labels their selectors match on (a renamed metric
// would leave a rule that can never fire; promtool's tests cannot see it,
// they feed the rules made-up series).
func TestAlertRulesNameExportedSeries(t *testing.T) {
	raw, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	e := liveSeries(t)
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expr: ")
		if !ok || expr == "|" {
			continue
		}
		n++
		checkExpr(t, "alerts.yml", expr, e)
	}
	// The multi-line expressions (expr: |) are checked by name too.
	for _, m := range metricName.FindAllStringSubmatch(string(raw), -1) {
		if _, ok := e[m[1]]; !ok && m[1] != "up" {
			t.Errorf("alerts.yml names %s, which nothing exports", m[1])
		}
	}
	if n < 10 {
		t.Errorf("found %d single-line rule expressions, want at least 10", n)
	}
}
