package host

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

func config(mode string, limit int64) wire.Config {
	return wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: limit, Period: int64(24 * time.Hour), Mode: mode},
		{Name: "global", Algorithm: wire.FixedWindow, Limit: 1000, Period: int64(24 * time.Hour)}}}
}

func get(t *testing.T, srv *httptest.Server, q url.Values) (*http.Response, decisionJSON) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/v1/decide?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d decisionJSON
	json.NewDecoder(resp.Body).Decode(&d)
	return resp, d
}

// TestHTTPDecisionsAndHeaders: one isolate, no coordinator: 200 while the
// limit allows, then 429 with Retry-After, and the IETF RateLimit fields
// throughout; bad input is a 400.
func TestHTTPDecisionsAndHeaders(t *testing.T) {
	h, err := New(context.Background(), Options{Config: config(wire.Approximate, 2), Isolates: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	q := url.Values{"limiter": {"api"}, "key": {"customer-1"}}
	for i, want := range []int{200, 200, 429} {
		resp, d := get(t, srv, q)
		if resp.StatusCode != want {
			t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, want)
		}
		if p := resp.Header.Get("RateLimit-Policy"); p != `"api";q=2;w=86400` {
			t.Errorf("RateLimit-Policy %q", p)
		}
		if rl := resp.Header.Get("RateLimit"); !strings.HasPrefix(rl, `"api";r=`+[]string{"1", "0", "0"}[i]+";t=") {
			t.Errorf("request %d: RateLimit %q", i, rl)
		}
		if ra := resp.Header.Get("Retry-After"); (want == 429) != (ra != "") {
			t.Errorf("request %d: Retry-After %q", i, ra)
		}
		if d.Allowed != (want == 200) || d.Limiter != "api" {
			t.Errorf("request %d: body %+v", i, d)
		}
	}
	// Two limiters together, all or nothing: the global one is not charged
	// when the per-customer one denies.
	resp, d := get(t, srv, url.Values{"limiter": {"api", "global"}, "key": {"customer-1", "all"}})
	if resp.StatusCode != 429 || d.Limiter != "api" {
		t.Fatalf("multi-limiter: %d %+v", resp.StatusCode, d)
	}
	if _, d := get(t, srv, url.Values{"limiter": {"global"}, "key": {"all"}, "cost": {"0"}}); d.Remaining != 1000 {
		t.Fatalf("the global limiter was charged by a denied request: %+v", d)
	}
	hz, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hz.Body)
	hz.Body.Close()
	var hl Health
	if err := json.Unmarshal(body, &hl); err != nil || hz.StatusCode != 200 || hl.Status != "ok" || hl.SyncErrors != 0 ||
		len(hl.Isolates) != 1 || hl.Isolates[0].LastSyncAgeMS != -1 {
		t.Errorf("healthz of a host without coordinator: %d %q (%v)", hz.StatusCode, body, err)
	}
	for _, bad := range []url.Values{
		{"limiter": {"nope"}, "key": {"k"}},
		{"limiter": {"api"}},
		{"limiter": {"api"}, "key": {"k"}, "cost": {"-1"}},
		{"limiter": {"api"}, "key": {strings.Repeat("k", 300)}},
	} {
		if resp, _ := get(t, srv, bad); resp.StatusCode != 400 {
			t.Errorf("%v: status %d, want 400", bad, resp.StatusCode)
		}
	}
}

// TestStrictHostsShareALimitThroughTheCoordinator: two hosts of two
// isolates each sync with one coordinator (Pebble on disk, loopback HTTP)
// in strict mode: requests that miss a lease wait for a sync, and together
// they admit exactly the limit.
func TestStrictHostsShareALimitThroughTheCoordinator(t *testing.T) {
	for _, mode := range []string{wire.Strict, wire.Auto} {
		t.Run(mode, func(t *testing.T) { leasedHostsShareALimit(t, mode) })
	}
}

// An auto limiter on a host without a coordinator decides alone
// (approximate): it admits up to the limit, not nothing.
func TestAutoAloneDecidesLocally(t *testing.T) {
	h, err := New(context.Background(), Options{Config: config(wire.Auto, 6), Isolates: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	allowed := 0
	for i := 0; i < 10; i++ {
		if resp, _ := get(t, srv, url.Values{"limiter": {"api"}, "key": {"k"}}); resp.StatusCode == 200 {
			allowed++
		}
	}
	if allowed != 6 {
		t.Fatalf("auto alone admitted %d of 10, want the limit 6", allowed)
	}
}

// leasedHostsShareALimit: two hosts with a leased mode share one limit
// exactly through a real coordinator.
func leasedHostsShareALimit(t *testing.T, mode string) {
	srvs := fleetWait(t, config(mode, 6), 2, 3*time.Second)
	allowed := 0
	for i := 0; i < 12; i++ {
		resp, _ := get(t, srvs[i%2], url.Values{"limiter": {"api"}, "key": {"org-1"}})
		if resp.StatusCode == 200 {
			allowed++
		}
	}
	if allowed != 6 {
		t.Fatalf("%d admitted by two strict hosts, want exactly the limit 6", allowed)
	}
}
