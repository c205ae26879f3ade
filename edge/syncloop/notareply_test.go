package syncloop

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A 200 answer that is a web page (a proxy or captive portal in the
// coordinator's place) is refused naming its Content-Type and start, and
// the batch goes on to the next coordinator of the list, which takes it;
// before, the module's decoder refused it as "malformed input" and the
// attempt did not fail over.
func TestWebPageAnswerIsNoReply(t *testing.T) {
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!DOCTYPE html><html><body>Sign in to the hotel Wi-Fi</body></html>"))
	}))
	defer portal.Close()
	var served atomic.Int64
	coord := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/msgpack")
		_, _ = w.Write([]byte{0x80})
	}))
	defer coord.Close()
	_, err := (&HTTPTransport{URL: portal.URL}).Sync(context.Background(), []byte{0x80}, nil)
	if err == nil || !strings.Contains(err.Error(), `Content-Type "text/html; charset=utf-8"`) || !strings.Contains(err.Error(), "hotel Wi-Fi") {
		t.Fatalf("a web page's 200: %v, want an error naming its type and start", err)
	}
	out, err := (&HTTPTransport{URL: portal.URL + "," + coord.URL}).Sync(context.Background(), []byte{0x80}, nil)
	if err != nil || string(out) != "\x80" || served.Load() != 1 {
		t.Fatalf("with a coordinator after the portal: %q, %v (served %d), want the coordinator's reply", out, err, served.Load())
	}
	// A reply without a Content-Type (sniffed by net/http) is taken.
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte{0x81, 0xa1, 'v', 0x01}) }))
	defer bare.Close()
	if out, err := (&HTTPTransport{URL: bare.URL}).Sync(context.Background(), []byte{0x80}, nil); err != nil || len(out) != 4 {
		t.Fatalf("a reply without a Content-Type: %q, %v", out, err)
	}
}
