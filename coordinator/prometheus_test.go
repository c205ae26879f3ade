package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// prometheusBinary returns the path of the real Prometheus server, skipping
// t when it is absent (failing it under CI=true: `make tools` installs it,
// scripts/install-prometheus.sh).
func prometheusBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("prometheus is not installed (CI=true): run make tools (scripts/install-prometheus.sh): %v", err)
		}
		t.Skip("SKIPPED: the prometheus binary is not installed; run make tools (scripts/install-prometheus.sh)")
	}
	return p
}

// freeLoopbackAddr returns a loopback address with a port free a moment
// ago, for a server that cannot take port 0.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startPrometheus runs the real Prometheus server on loopback, scraping
// target's /metrics every 200 ms as the job edgelimit-coordinator and
// evaluating the shipped alert rules (deploy/prometheus/alerts.yml), with
// its storage in a temporary directory, and returns its base URL; it is
// stopped when t ends.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	bin := prometheusBinary(t)
	dir := t.TempDir()
	rules, err := os.ReadFile(filepath.Join("..", "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 200ms
  scrape_timeout: 200ms
  evaluation_interval: 200ms
rule_files: [alerts.yml]
scrape_configs:
  - job_name: edgelimit-coordinator
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready on %s after 30 s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// promQuery returns the value of the one sample query answers at
// Prometheus base now (ok false: no sample).
func promQuery(t *testing.T, base, query string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	if body.Status != "success" {
		t.Fatalf("query %s: %s %s", query, body.Status, body.Error)
	}
	if len(body.Data.Result) != 1 {
		return 0, false
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("query %s: value %q: %v", query, s, err)
	}
	return f, true
}

// waitPromValue polls Prometheus until query answers want (at most 30 s).
func waitPromValue(t *testing.T, base, query string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, ok := promQuery(t, base, query)
		if ok && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: %s = %v (sample: %v) after 30 s, want %v", query, got, ok, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPrometheusScrapesCoordinator: the real Prometheus server scrapes a
// live coordinator on loopback; after real syncs over HTTP its API answers
// the per-limiter series with the values the batches reported, and follows
// them as more syncs arrive.
func TestPrometheusScrapesCoordinator(t *testing.T) {
	prometheusBinary(t) // skip (or fail under CI) before starting anything
	c, clk, srv := newTestServer(t, fwFollowsUpstream)
	prom := startPrometheus(t, srv.Listener.Addr().String())
	waitPromValue(t, prom, `up{job="edgelimit-coordinator"}`, 1)

	w := clk.now() / sec
	b := batch("edge-1", 1, clk.now(),
		wire.Delta{Limiter: "fw", Key: "k1", Window: w, Delta: 40, Demand: 45},
		wire.Delta{Limiter: "tb", Key: "b", Delta: 3, Demand: 3})
	if st, _, p := syncAs(t, srv, "", b); st != 200 {
		t.Fatalf("sync: %d %+v", st, p)
	}
	waitPromValue(t, prom, `edgelimit_coordinator_admitted_total{limiter="fw"}`, 40)
	waitPromValue(t, prom, `edgelimit_coordinator_denied_total{limiter="fw"}`, 5)
	waitPromValue(t, prom, `edgelimit_coordinator_keys_near_limit{limiter="fw"}`, 0)

	// A second isolate takes k1 to its limit and reports an upstream pause.
	b2 := batch("edge-2", 1, clk.now(), wire.Delta{Limiter: "fw", Key: "k1", Window: w, Delta: 60, Demand: 70})
	b2.Signals = []wire.Signal{{Limiter: "fw", Key: "k1", Pause: 60 * sec}}
	if st, _, p := syncAs(t, srv, "", b2); st != 200 {
		t.Fatalf("sync: %d %+v", st, p)
	}
	waitPromValue(t, prom, `edgelimit_coordinator_admitted_total{limiter="fw"}`, 100)
	waitPromValue(t, prom, `sum(edgelimit_coordinator_denied_total)`, 15)
	waitPromValue(t, prom, `edgelimit_coordinator_keys_at_limit{limiter="fw"}`, 1)
	waitPromValue(t, prom, `edgelimit_coordinator_keys_paused{limiter="fw"}`, 1)
	waitPromValue(t, prom, `edgelimit_coordinator_upstream_pauses_total{limiter="fw"}`, 1)
	waitPromValue(t, prom, `edgelimit_coordinator_syncs_total`, 2)
	waitPromValue(t, prom, `count(edgelimit_coordinator_admitted_total)`, float64(len(testConfig().Limiters)))
	if err := c.ResetKey(context.Background(), "fw", "k1"); err != nil {
		t.Fatal(err)
	}
	waitPromValue(t, prom, `edgelimit_coordinator_keys_at_limit{limiter="fw"}`, 0)
	waitRulesHealthy(t, prom)
}

// waitRulesHealthy polls Prometheus until every rule of the shipped alert
// rules was evaluated over the live series without an error (at most 30 s).
func waitRulesHealthy(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/api/v1/rules")
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		n, ok := 0, 0
		var bad []string
		for _, g := range body.Data.Groups {
			for _, r := range g.Rules {
				n++
				switch r.Health {
				case "ok":
					ok++
				case "err":
					bad = append(bad, r.Name+": "+r.LastError)
				}
			}
		}
		if len(bad) > 0 {
			t.Fatalf("alert rules failed to evaluate: %v", bad)
		}
		if n > 0 && ok == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alert rules: %d of %d evaluated after 30 s", ok, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
