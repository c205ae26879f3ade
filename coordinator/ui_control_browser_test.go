package coordinator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/internal/browsertest"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestUIControlPanel drives the dashboard's live control panel in headless
// Chromium with an admin token: a new limit, a key's override, a fleet
// pause of a limiter and its resume, each read back from the coordinator.
// It writes out/ui-control.png.
func TestUIControlPanel(t *testing.T) {
	bctx := browsertest.Start(t)
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "llm", Algorithm: wire.FixedWindow, Limit: 6, Period: int64(time.Second)},
		{Name: "inbox", Algorithm: wire.FixedWindow, Limit: 200, Period: int64(24 * time.Hour)},
	}}
	const token = "ui-admin-token"
	c, err := coordinator.Open(coordinator.Options{Dir: t.TempDir(), Config: cfg, Tokens: []string{token}})
	if err != nil {
		t.Fatal(err)
	}
	curl := serveLoopback(t, c)
	go func() { // accept every confirmation
		for _, err := range chromedp.Events(bctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			go chromedp.Do(bctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := cdp.Call(ctx, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
				return err
			}))
		}
	}()
	control := func() *coordinator.ControlView {
		v, err := c.Control(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	until := func(what string, ok func(v *coordinator.ControlView) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(control()); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the coordinator's state %+v", what, control())
			}
		}
	}
	llmRow := `#ctl-limits tr[data-limiter="llm"]`
	err = chromedp.Do(bctx,
		pageLogin(curl, token),
		chromedp.WaitVisible(chromedp.CSS(llmRow)),
		chromedp.SetValue(chromedp.CSS("#ctl-reason"), "quota raised by the provider"),
		chromedp.SetValue(chromedp.CSS(llmRow+" input.ctl-new-limit"), "12"),
		chromedp.Click(chromedp.CSS(llmRow+" button.ctl-set-limit")),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	until("limit set from the page", func(v *coordinator.ControlView) bool {
		return v.Limiters[0].Limit == 12 && len(v.Limiters[0].Changes) == 1 && v.Limiters[0].Changes[0].Reason == "quota raised by the provider"
	})
	err = chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#ctl-ov-limiter"), "inbox"),
		chromedp.SetValue(chromedp.CSS("#ctl-ov-key"), "inbox-03/ü"),
		chromedp.SetValue(chromedp.CSS("#ctl-ov-limit"), "500"),
		chromedp.Click(chromedp.CSS(`#ctl-override button[type="submit"]`)),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	until("override set from the page", func(v *coordinator.ControlView) bool { return v.Limiters[1].Overrides["inbox-03/ü"] == 500 })
	pauseRow := `#ctl-pauses tr[data-limiter="llm"]`
	err = chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS("#ctl-reason"), "upstream outage INC-9"),
		chromedp.SetValue(chromedp.CSS("#ctl-p-limiter"), "llm"),
		chromedp.SetValue(chromedp.CSS("#ctl-p-for"), "20m"),
		chromedp.Click(chromedp.CSS(`#ctl-pause button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(pauseRow)),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	v := control()
	if len(v.Pauses) != 1 || v.Pauses[0].Limiter != "llm" || v.Pauses[0].Reason != "upstream outage INC-9" || v.Pauses[0].Left > int64(20*time.Minute) || v.Pauses[0].Left < int64(19*time.Minute) {
		t.Fatalf("pause from the page: %+v", v.Pauses)
	}
	row, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(pauseRow)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(row, "llm (every key)") || !strings.Contains(row, "upstream outage INC-9") || !strings.Contains(row, "min") {
		t.Errorf("pause row %q", row)
	}
	browsertest.Screenshot(t, bctx, "ui-control.png")
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(pauseRow+" button.ctl-resume")), chromedp.WaitNotPresent(chromedp.CSS(pauseRow))); err != nil {
		t.Fatalf("resume from the page: %v", err)
	}
	if v := control(); len(v.Pauses) != 0 {
		t.Fatalf("after resume from the page: %+v", v.Pauses)
	}
}
