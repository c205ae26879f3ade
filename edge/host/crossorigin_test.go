package host

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestCrossSiteBrowserRequestsRefused: a web page the operator's browser
// opens spent the budget of a host's keys with an <img> whose src is a
// GET /v1/decide (a cost of the whole limit empties the key) and paused a key for 30 s
// with a text/plain POST /v1/observe of a 429, neither of which needs a
// preflight. Both are refused 403 and change nothing; the same requests
// without a browser's headers (curl, a server) and from the same origin
// still work.
func TestCrossSiteBrowserRequestsRefused(t *testing.T) {
	const limit = 1000
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{{Name: "llm", Algorithm: wire.FixedWindow,
		Limit: limit, Period: int64(24 * time.Hour), Upstream: &wire.UpstreamConfig{CircuitFailures: 3}}}}
	h, err := New(context.Background(), Options{Config: cfg, Isolates: 1, RetryWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	do := func(method, path, body string, hdr map[string]string) (int, decisionJSON) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d decisionJSON
		json.NewDecoder(resp.Body).Decode(&d)
		return resp.StatusCode, d
	}
	spend := "/v1/decide?" + url.Values{"limiter": {"llm"}, "key": {"k"}, "cost": {"1000"}}.Encode()
	one := "/v1/decide?" + url.Values{"limiter": {"llm"}, "key": {"k"}}.Encode()
	pause := `{"limiter":"llm","key":"k","status":429,"headers":{"Retry-After":"30"}}`
	img := map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"} // <img src>: no Origin
	fetch := map[string]string{"Origin": "https://evil.example"}                          // a browser without Sec-Fetch-Site
	form := map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
	for _, hdr := range []map[string]string{img, fetch, form} {
		for _, m := range []string{"GET", "POST"} {
			if st, _ := do(m, spend, "", hdr); st != http.StatusForbidden {
				t.Errorf("%s /v1/decide from another site %v: %d, want 403", m, hdr, st)
			}
			if st, _ := do(m, strings.Replace(spend, "decide", "wait", 1), "", hdr); st != http.StatusForbidden {
				t.Errorf("%s /v1/wait from another site %v: %d, want 403", m, hdr, st)
			}
		}
		if st, _ := do("POST", "/v1/observe", pause, hdr); st != http.StatusForbidden {
			t.Errorf("POST /v1/observe from another site %v: %d, want 403", hdr, st)
		}
	}
	// Nothing was spent or paused: curl's decision is allowed with the
	// whole limit left but its own unit.
	st, d := do("GET", one, "", nil)
	if st != 200 || d.Remaining != limit-1 {
		t.Fatalf("curl's decision after the refused requests: %d %+v, want 200 with %d remaining", st, d, limit-1)
	}
	same := map[string]string{"Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}
	if st, _ := do("GET", one, "", same); st != 200 {
		t.Fatalf("a decision from the host's own origin: %d, want 200", st)
	}
	if st, _ := do("POST", "/v1/observe", pause, map[string]string{"Content-Type": "application/json"}); st != 200 {
		t.Fatalf("curl's observation: %d, want 200", st)
	}
	if st, _ := do("GET", one, "", nil); st != http.StatusTooManyRequests {
		t.Fatalf("after curl's 429 observation: %d, want 429 (paused)", st)
	}
}
