package coordinator_test

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/internal/browsertest"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestUIShowsKeysAsTheyAre: any client names keys, and the page must not
// let one pass for another. In headless Chromium: a key "\u202Eyek-mitciv"
// (a right-to-left override) is shown with the override written out
// (before, it drew as "victim-key", at 10 of 10, beside the real one at
// 3); and of two keys whose text is the same (bytes ff fe "abc", which is
// not UTF-8, and U+FFFD U+FFFD "abc"), the history chart of each is the
// chart of its own bytes (before, the chart button sent the text, and the
// row admitted 9 drew the other key: admitted 1).
func TestUIShowsKeysAsTheyAre(t *testing.T) {
	bctx := browsertest.Start(t)
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 10, Period: int64(24 * time.Hour)}}}
	const token = "ui-test-token"
	dir := t.TempDir()
	open := func() (string, func()) {
		c, err := coordinator.Open(coordinator.Options{Dir: dir, Config: cfg, Tokens: []string{token}})
		if err != nil {
			t.Fatal(err)
		}
		return serveUntil(t, c)
	}
	url, stop := open()
	now := time.Now().UnixNano()
	b := &wire.Batch{Version: wire.Version, Isolate: "loader", Secret: strings.Repeat("s", 32), Seq: 1, At: now}
	counts := map[string]int64{"\u202eyek-mitciv": 10, "victim-key": 3, "\xff\xfeabc": 9, "\ufffd\ufffdabc": 1}
	for k, n := range counts {
		b.Entries = append(b.Entries, wire.Delta{Limiter: "api", Key: k, Window: now / int64(24*time.Hour), Delta: n, Demand: n})
	}
	if st := postBatch(t, url, token, b); st != 200 {
		t.Fatalf("sync: %d", st)
	}
	stop() // the history is read from the store after a restart, as in TestUIHistoryInBrowser
	url, _ = open()
	b64 := func(k string) string { return base64.RawURLEncoding.EncodeToString([]byte(k)) }
	poll := func(what, expr string) { t.Helper(); pagePoll(t, bctx, what, expr) }
	if err := chromedp.Do(bctx,
		pageLogin(url, token),
	); err != nil {
		t.Fatalf("browser: %v", err)
	}
	poll("the override written out in the keys table",
		`(() => { const r = document.querySelector('div[data-limiter="api"] tr[data-key-b64="`+b64("\u202eyek-mitciv")+`"]');
			return r !== null && r.cells[0].textContent === "\\u{202e}yek-mitciv"; })()`)
	poll("the real key as it is",
		`document.querySelector('div[data-limiter="api"] tr[data-key-b64="`+b64("victim-key")+`"]').cells[0].textContent === "victim-key"`)
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS("#hist-key"), "\ufffd")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"\xff\xfeabc", "\ufffd\ufffdabc"} {
		row := `#hist-search tr[data-key-b64="` + b64(k) + `"]`
		poll("the search lists "+b64(k), `document.querySelector('`+row+`') !== null`)
		if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(row+` button.chart`))); err != nil {
			t.Fatal(err)
		}
		poll("the chart of "+b64(k), `(() => { const d = document.querySelector("#hist-totals");
			return d !== null && d.dataset.admitted === "`+strconv.FormatInt(counts[k], 10)+`"; })()`)
	}
}
