package syncloop

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestHTTPTransportFailsOver: with two coordinators listed, a batch the
// first cannot take (503, then unreachable) goes to the second in the same
// call, and the transport stays with it; a 409 is not a reason to move.
func TestHTTPTransportFailsOver(t *testing.T) {
	var aStatus atomic.Int64
	aStatus.Store(http.StatusServiceUnavailable)
	var aHits, bHits atomic.Int64
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		aHits.Add(1)
		w.WriteHeader(int(aStatus.Load()))
	}))
	defer a.Close()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bHits.Add(1)
		if r.URL.Path != "/v1/sync" {
			t.Errorf("path %s", r.URL.Path)
		}
		w.Write([]byte("ok"))
	}))
	tr := &HTTPTransport{URL: a.URL + ", " + b.URL + "/"}
	out, err := tr.Sync(context.Background(), []byte("batch"), nil)
	if err != nil || string(out) != "ok" || aHits.Load() != 1 || bHits.Load() != 1 || tr.Failovers() != 1 {
		t.Fatalf("first sync: %q %v, hits a=%d b=%d, failovers %d", out, err, aHits.Load(), bHits.Load(), tr.Failovers())
	}
	// It stays with b.
	if _, err := tr.Sync(context.Background(), []byte("batch"), nil); err != nil || aHits.Load() != 1 || bHits.Load() != 2 {
		t.Fatalf("second sync: %v, hits a=%d b=%d", err, aHits.Load(), bHits.Load())
	}
	// b goes away: back to a, which now answers 409 (not a reason to move on).
	b.Close()
	aStatus.Store(http.StatusConflict)
	_, err = tr.Sync(context.Background(), []byte("batch"), nil)
	if !errors.Is(err, ErrRefused) || aHits.Load() != 2 || tr.Failovers() != 2 {
		t.Fatalf("after b closed: %v, hits a=%d, failovers %d", err, aHits.Load(), tr.Failovers())
	}
	if _, err = tr.Sync(context.Background(), []byte("batch"), nil); aHits.Load() != 3 || tr.Failovers() != 2 {
		t.Fatalf("a 409 moved the transport: %v, failovers %d", err, tr.Failovers())
	}
	// Both down: the error of the last one tried.
	a.Close()
	if _, err := tr.Sync(context.Background(), []byte("batch"), nil); err == nil {
		t.Fatal("no error with every coordinator down")
	}
}
