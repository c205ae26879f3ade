package coordinator_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/internal/browser"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The dashboard in a real browser: a coordinator and an edge host on
// loopback, a few requests through the host, then /ui in headless Chromium
// shows the limiter, the key with its count and the isolate; the reset
// button (after its confirmation) resets the key at the coordinator. A
// screenshot is written to out/ui.png (kept by CI).
func TestDashboardInBrowser(t *testing.T) {
	if _, err := browser.Find(); errors.Is(err, browser.ErrNoChromium) {
		t.Skip(err.Error())
	}
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "llm", Algorithm: wire.FixedWindow, Limit: 1000, Period: int64(time.Hour), Mode: wire.Approximate}}}
	c, err := coordinator.Open(coordinator.Options{InMemory: true, Config: cfg, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	h, err := host.New(context.Background(), host.Options{Config: cfg, Isolates: 1, Coordinator: srv.URL,
		Sync: syncloop.Options{Interval: 20 * time.Millisecond}, IDPrefix: "edge-ui"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	edge := httptest.NewServer(h.Handler())
	defer edge.Close()
	for i := 0; i < 7; i++ {
		resp, err := http.Get(edge.URL + "/v1/decide?" + url.Values{"limiter": {"llm"}, "key": {"org-42"}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	count := func() int64 {
		ks, err := c.KeyState(context.Background(), "llm", "org-42")
		if err != nil {
			t.Fatal(err)
		}
		return ks.Count
	}
	for deadline := time.Now().Add(5 * time.Second); count() != 7; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the host's requests did not reach the coordinator: count %d", count())
		}
	}
	ctx, stop, err := browser.New(context.Background(), 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var html string
	row := `tr[data-key="org-42"]`
	if err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/ui"), chromedp.WaitVisible(row),
		chromedp.OuterHTML("body", &html)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`data-limiter="llm"`, `<td class="count">7</td>`, "edge-ui-0", "fixed_window"} {
		if !strings.Contains(html, want) {
			t.Errorf("the dashboard lacks %q:\n%s", want, html)
		}
	}
	if err := browser.Screenshot(ctx, filepath.Join("..", "out", "ui.png")); err != nil {
		t.Fatal(err)
	}
	// Reset from the page (the confirmation is accepted): the key's row goes
	// and the coordinator's count is 0.
	if err := chromedp.Run(ctx, chromedp.Click(`button.reset[data-key="org-42"]`), chromedp.WaitNotPresent(row)); err != nil {
		t.Fatalf("reset from the page: %v", err)
	}
	if n := count(); n != 0 {
		t.Fatalf("after the reset button: count %d, want 0", n)
	}
}
