package coordinator_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/internal/browsertest"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestUIHistoryInBrowser: 30 inboxes synced, then a graceful restart of
// the coordinator on the same Pebble directory and an edge host of two
// isolates on loopback. In headless Chromium the page's history section
// charts the limiter's last hour from the store (60 points, the totals
// synced before the restart), the key box finds the 10 inboxes starting
// with "inbox-1", a found key's chart button charts that key alone, the
// 24 h button switches to 1440 minutes, and the isolates table groups the
// edge host's isolates under one host row with their state. It writes
// out/ui-history.png.
func TestUIHistoryInBrowser(t *testing.T) {
	bctx := browsertest.Start(t)
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "inbox-daily", Algorithm: wire.FixedWindow, Limit: 200, Period: int64(24 * time.Hour)}}}
	const token = "ui-test-token"
	dir := t.TempDir()
	open := func() (*coordinator.Coordinator, string, func()) {
		c, err := coordinator.Open(coordinator.Options{Dir: dir, Config: cfg, Tokens: []string{token}})
		if err != nil {
			t.Fatal(err)
		}
		url, stop := serveUntil(t, c)
		return c, url, stop
	}
	_, url, stop := open()
	now := time.Now().UnixNano()
	b := &wire.Batch{Version: wire.Version, Isolate: "loader", Secret: strings.Repeat("s", 32), Seq: 1, At: now}
	var total int64
	for i := range 30 {
		d := wire.Delta{Limiter: "inbox-daily", Key: fmt.Sprintf("inbox-%02d", i), Window: now / int64(24*time.Hour),
			Delta: int64(i + 1), Demand: int64(i + 1)}
		total += d.Delta
		b.Entries = append(b.Entries, d)
	}
	if st := postBatch(t, url, token, b); st != 200 {
		t.Fatalf("sync: %d", st)
	}
	stop()
	_, url, _ = open()
	_, hurl := serveEdge(t, host.Options{Config: cfg, Isolates: 2, Coordinator: url, Token: token, IDPrefix: "ui-edge",
		Sync: syncloop.Options{Interval: 50 * time.Millisecond}})

	poll := func(what, expr string) { t.Helper(); pagePoll(t, bctx, what, expr) }
	err := chromedp.Do(bctx,
		pageLogin(url, token),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	poll("the limiter's hour from the store",
		fmt.Sprintf(`(() => { const s = document.querySelector("#hist-svg"), d = document.querySelector("#hist-totals");
			return s && d && s.dataset.points === "60" && d.dataset.admitted === "%d"; })()`, total))
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS("#hist-key"), "inbox-1")); err != nil {
		t.Fatal(err)
	}
	poll("the search of inbox-1", `document.querySelectorAll("#hist-search tbody tr").length === 10 &&
		document.querySelector("#hist-search tbody tr").dataset.key === "inbox-10"`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#hist-search tr[data-key="inbox-12"] button.chart`))); err != nil {
		t.Fatal(err)
	}
	poll("inbox-12's chart", `(() => { const d = document.querySelector("#hist-totals");
		return d && d.dataset.admitted === "13" && d.textContent.includes("inbox-12"); })()`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#hist-ranges button[data-range="24h"]`))); err != nil {
		t.Fatal(err)
	}
	poll("the 24 h chart", `document.querySelector("#hist-svg").dataset.points === "1440"`)
	for i := range 8 { // traffic on both isolates, so both sync
		resp, err := http.Get(fmt.Sprintf("%s/v1/decide?limiter=inbox-daily&key=inbox-%02d", hurl, 30+i))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	poll("the edge host's isolates grouped", `(() => {
		const h = document.querySelector('#isolates tr[data-host="ui-edge"]');
		const i = document.querySelectorAll('#isolates tr[data-isolate^="ui-edge-"]');
		return h && i.length === 2 && [...i].every((r) => r.dataset.state !== undefined && r.dataset.state !== ""); })()`)
	series, err := chromedp.Run(bctx, chromedp.Evaluate[string](
		`[...document.querySelectorAll("#hist-svg polyline")].map((p) => p.dataset.series).join(",")`))
	if err != nil || series != "admitted,denied,paused" {
		t.Errorf("chart lines %q (%v), want admitted,denied,paused", series, err)
	}
	browsertest.Screenshot(t, bctx, "ui-history.png")
}
