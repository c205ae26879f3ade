package coordinator_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// pageLogin is the actions that open the dashboard at url in the browser
// and give it token, as an operator does.
func pageLogin(url, token string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(url+"/ui"),
		chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS(`#tokenform button`)),
	)
}

// pagePoll waits up to 20 s for the page's JavaScript expression expr to
// be true, failing the test with what was awaited.
func pagePoll(t *testing.T, bctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("%s: %v (waited for %s)", what, err, expr)
	}
}
