package syncloop

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A coordinator URL that answers with a redirect (a proxy moving the path,
// http:// redirected to https://) is refused naming where it points, and
// the batch is not posted there: following it sent the batch, key names
// included, to wherever the answer pointed (307, 308), or turned the POST
// into a GET that failed as something else (301, 302). The probe of a
// health check says the same.
func TestRedirectIsRefusedNotFollowed(t *testing.T) {
	var elsewhere atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer target.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+r.URL.Path, code)
		}))
		tr := &HTTPTransport{URL: redirect.URL}
		_, err := tr.Sync(context.Background(), []byte{0x80}, nil)
		want := `a redirect to "` + target.URL + `/v1/sync"`
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "give the coordinator's own URL") {
			t.Errorf("%d: %v, want an error naming %s", code, err, want)
		}
		err = tr.Probe(context.Background())
		if err == nil || !strings.Contains(err.Error(), `a redirect to "`+target.URL+`/v1/limiters"`) {
			t.Errorf("%d: probe %v, want an error naming the redirect", code, err)
		}
		redirect.Close()
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("%d requests followed a redirect", n)
	}
}
