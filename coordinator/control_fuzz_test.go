package coordinator

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// FuzzControlAPI sends arbitrary bodies and keys to the control routes:
// every answer is 200 or a 4xx problem (never 5xx), and the limits in
// force stay valid.
func FuzzControlAPI(f *testing.F) {
	for _, s := range []struct {
		route uint8
		key   string
		body  string
	}{
		{0, "", `{"limit": 7, "reason": "x"}`}, {0, "", `{"limit": -1}`}, {0, "", `{"limit": 1099511627777}`},
		{1, "k", `{"limit": 5}`}, {1, "%2e%2e", `{"limit": 5}`}, {2, "vip", ``},
		{3, "", `{"for": "10m", "reason": "r"}`}, {3, "", `{"for": "1d", "reason": ""}`},
		{4, "k", `{"for": "30s", "reason": "r"}`}, {5, "", ``}, {6, "k", ``}, {0, "", `[1,2]`}, {3, "", `{"for": 5}`},
	} {
		f.Add(s.route, s.key, []byte(s.body))
	}
	c, _ := newTestCoordinator(f, t0, nil)
	srv := httptest.NewServer(c.Handler())
	f.Cleanup(srv.Close)
	f.Fuzz(func(t *testing.T, route uint8, key string, body []byte) {
		routes := []struct{ method, path string }{
			{"PUT", "/v1/limiters/fw/limit"}, {"PUT", "/v1/limiters/fw/overrides/"}, {"DELETE", "/v1/limiters/fw/overrides/"},
			{"POST", "/v1/limiters/sw/pause"}, {"POST", "/v1/limiters/sw/pause/"}, {"DELETE", "/v1/limiters/sw/pause"},
			{"DELETE", "/v1/limiters/sw/pause/"},
		}
		r := routes[int(route)%len(routes)]
		path := r.path
		if path[len(path)-1] == '/' {
			path += key
		}
		req, err := http.NewRequest(r.method, srv.URL+path, bytes.NewReader(body))
		if err != nil {
			return // not a URL
		}
		cl := *srv.Client()
		cl.Timeout = 10 * time.Second
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 || resp.StatusCode != 200 && resp.StatusCode/100 != 4 {
			t.Fatalf("%s %s %q: %d %s", r.method, path, body, resp.StatusCode, out)
		}
		if _, err := c.Control(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := c.ctl.limits.Load().Config.Validate(); err != nil {
			t.Fatalf("limits in force not valid after %s %s %q: %v", r.method, path, body, err)
		}
	})
}
