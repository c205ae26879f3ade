package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/edgelimit/edgelimit/clock"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/edgelimit/edgelimit/coordinator/internal/coordtest"
	"github.com/edgelimit/edgelimit/coordinator/merge"
)

const sec = coordtest.Sec

// testConfig has one limiter of each kind.
var testConfig = coordtest.Config

// fakeClock is a settable clock in ns.
type fakeClock struct{ t atomic.Int64 }

func (f *fakeClock) now() int64        { return f.t.Load() }
func (f *fakeClock) set(t int64)       { f.t.Store(t) }
func (f *fakeClock) add(d int64) int64 { return f.t.Add(d) }

// newTestCoordinator opens an in-memory coordinator at virtual time t0.
func newTestCoordinator(t testing.TB, t0 int64, mod func(*Options)) (*Coordinator, *fakeClock) {
	t.Helper()
	clk := &fakeClock{}
	clk.set(t0)
	opts := Options{InMemory: true, Config: testConfig(), Clock: clock.Func(clk.now), GCInterval: -1}
	if testStore != nil {
		opts.Store = testStore(t)
	}
	if mod != nil {
		mod(&opts)
	}
	c, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, clk
}

// batch, mustSync and viewOf are coordtest's.
var (
	batch    = coordtest.Batch
	mustSync = coordtest.MustSync
	viewOf   = coordtest.ViewOf
)

func getKey(t testing.TB, c *Coordinator, limiter, key string) *merge.KeyState {
	t.Helper()
	ks, err := c.KeyState(context.Background(), limiter, key)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// httpPost posts body to the test server and returns status, body.
func httpPost(t testing.TB, srv *httptest.Server, ctype string, body []byte, hdr map[string]string) (int, []byte) {
	t.Helper()
	st, out, _ := httpPostHdr(t, srv, ctype, body, hdr)
	return st, out
}

// httpPostHdr is httpPost that also returns the response's header.
func httpPostHdr(t testing.TB, srv *httptest.Server, ctype string, body []byte, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/sync", bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header
}

func decodeProblem(t testing.TB, b []byte) problem {
	t.Helper()
	var p problem
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("not problem+json: %q: %v", b, err)
	}
	return p
}
