package dashboard

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHistoryRoutesWithoutHistory: a coordinator whose store keeps no
// history answers its history route 501 (not an empty chart), an unknown
// limiter 404; the page's script is served, other files are not.
func TestHistoryRoutesWithoutHistory(t *testing.T) {
	src := &fakeSource{now: t0}
	d := New(testConfig(), t0)
	mux := http.NewServeMux()
	d.Routes(mux, src, nil)
	for path, want := range map[string]int{
		"/v1/limiters/fw/history":   501,
		"/v1/limiters/nope/history": 404,
		"/ui/history.js":            200,
		"/ui/index.html":            404,
		"/ui/nope.js":               404,
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
	}
}
