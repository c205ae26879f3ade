package coordinator_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
)

// TestDNSRebindingRefused: a coordinator without tokens on loopback
// answered any Host, so a page of a name its attacker points at 127.0.0.1
// (DNS rebinding) was same-origin with it: it read /v1/control and paused
// a limiter (its Origin matches its Host, so the cross-origin check passes
// it). Requests whose Host is neither loopback nor allowed are refused 403
// and change nothing; loopback names and addresses, and a name given in
// AllowedHosts, pass.
func TestDNSRebindingRefused(t *testing.T) {
	c, err := coordinator.Open(coordinator.Options{Dir: t.TempDir(), Config: coordtest.Config(), GCInterval: -1,
		AllowedHosts: []string{"Coord.Internal"}})
	if err != nil {
		t.Fatal(err)
	}
	base := serveLoopback(t, c)
	port := base[strings.LastIndex(base, ":"):]
	do := func(method, path, host, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Host = host
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Origin", "http://"+host) // the rebinding page's own origin
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, h := range []string{"evil.example" + port, "evil.example", "localhost.evil.example" + port, "127.0.0.1.nip.io" + port, "coord.internal.evil.example"} {
		if st, body := do("GET", "/v1/control", h, ""); st != http.StatusForbidden {
			t.Errorf("GET /v1/control with Host %s: %d %.80s, want 403", h, st, body)
		}
		if st, _ := do("POST", "/v1/limiters/fw/pause", h, `{"for": "30d", "reason": "rebound"}`); st != http.StatusForbidden {
			t.Errorf("a pause with Host %s: %d, want 403", h, st)
		}
	}
	if st, body := do("GET", "/v1/control", "127.0.0.1"+port, ""); st != 200 || strings.Contains(body, "rebound") {
		t.Fatalf("control after the refused requests: %d %s, want 200 and no pause", st, body)
	}
	for _, h := range []string{"127.0.0.1" + port, "localhost" + port, "LOCALHOST.", "[::1]" + port, "127.1.2.3", "dash.localhost" + port,
		"coord.internal" + port, "COORD.INTERNAL"} {
		if st, _ := do("GET", "/healthz", h, ""); st != 200 {
			t.Errorf("GET /healthz with Host %s: %d, want 200", h, st)
		}
	}
	if st, _ := do("POST", "/v1/limiters/fw/pause", "coord.internal"+port, `{"for": "1m", "reason": "proxied"}`); st != 200 {
		t.Fatalf("a pause through the allowed host: %d, want 200", st)
	}
}
