package coordinator

import (
	"net/http"
	"strings"
	"testing"
)

// TestCrossSiteBrowserRequestsRefused: a coordinator without tokens (on
// loopback) is driven by any web page its operator's browser opens: a
// cross-site POST with a text/plain body needs no preflight. Such a
// request to pause a limiter for 30 days or a key for an hour is refused
// 403 (it paused them), and nothing is paused; the same requests from a
// client that is not a browser (curl, no Origin) and from the dashboard's
// own page (same origin) still work.
func TestCrossSiteBrowserRequestsRefused(t *testing.T) {
	_, _, srv := newTestServer(t, nil)
	post := func(path, body string, hdr map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	browser := map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
	oldBrowser := map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"} // no Sec-Fetch-Site
	for _, hdr := range []map[string]string{browser, oldBrowser} {
		if st := post("/v1/limiters/fw/pause", `{"for": "30d", "reason": "drive-by"}`, hdr); st != 403 {
			t.Fatalf("a cross-site page pauses limiter fw: %d, want 403", st)
		}
		if st := post("/v1/limiters/fw/keys/k", `{"pause": "1h"}`, hdr); st != 403 {
			t.Fatalf("a cross-site page pauses key fw/k: %d, want 403", st)
		}
	}
	if st, body := call(t, srv, "GET", "/v1/control", ""); st != 200 || strings.Contains(string(body), "drive-by") {
		t.Fatalf("control after the refused requests: %d %s, want no pause", st, body)
	}
	if st := post("/v1/limiters/fw/pause", `{"for": "1m", "reason": "curl"}`, nil); st != 200 {
		t.Fatalf("a pause with curl (no Origin): %d, want 200", st)
	}
	same := map[string]string{"Content-Type": "application/json", "Origin": srv.URL, "Sec-Fetch-Site": "same-origin"}
	if st := post("/v1/limiters/fw/pause/k", `{"for": "1m", "reason": "dashboard"}`, same); st != 200 {
		t.Fatalf("a pause from the dashboard's page: %d, want 200", st)
	}
}
