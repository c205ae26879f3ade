package coordinator_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/edgelimit/edgelimit/coordinator"
	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/edge/host"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/internal/browsertest"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// TestUIInBrowser runs the coordinator (Pebble on disk) and an edge host on
// loopback, admits a few requests through the host, and checks in headless
// Chromium that /ui shows the limiter, the key with its count and the
// host's isolates, and that the reset button (after its confirmation)
// resets the key. It writes out/ui.png.
func TestUIInBrowser(t *testing.T) {
	bctx := browsertest.Start(t)
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "inbox-daily", Algorithm: wire.FixedWindow, Limit: 10, Period: int64(24 * time.Hour)},
		{Name: "upstream", Algorithm: wire.GCRA, Limit: 6, Period: int64(time.Second)},
	}}
	const token = "ui-test-token"
	c, err := coordinator.Open(coordinator.Options{Dir: t.TempDir(), Config: cfg, Tokens: []string{token}})
	if err != nil {
		t.Fatal(err)
	}
	curl := serveLoopback(t, c)
	_, hurl := serveEdge(t, host.Options{Config: cfg, Isolates: 2, Coordinator: curl,
		Token: token, IDPrefix: "ui-edge", Sync: syncloop.Options{Interval: 50 * time.Millisecond}})
	for range 9 {
		resp, err := http.Get(hurl + "/v1/decide?limiter=inbox-daily&key=alice%40example.com")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("decide: %d", resp.StatusCode)
		}
	}
	// Wait (bounded) until the coordinator counted all nine.
	keyCount := func() int64 {
		req, _ := http.NewRequest("GET", curl+"/v1/limiters/inbox-daily/keys/alice@example.com", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ks merge.KeyState
		json.NewDecoder(resp.Body).Decode(&ks)
		return ks.Count
	}
	for deadline := time.Now().Add(10 * time.Second); keyCount() != 9; {
		if time.Now().After(deadline) {
			t.Fatalf("coordinator count %d, want 9", keyCount())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Accept the reset's confirmation dialog when it opens.
	confirmed := make(chan string, 1)
	go func() {
		for ev, err := range chromedp.Events(bctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			select {
			case confirmed <- ev.Message:
			default:
			}
			go chromedp.Do(bctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := cdp.Call(ctx, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
				return err
			}))
		}
	}()
	keyRow := chromedp.CSS(`div[data-limiter="inbox-daily"] tr[data-key="alice@example.com"]`)
	err = chromedp.Do(bctx,
		pageLogin(curl, token),
		chromedp.WaitVisible(keyRow),
		chromedp.WaitVisible(chromedp.CSS(`#isolates tr[data-isolate="ui-edge-1"]`)),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	text := func(sel chromedp.CSS) string {
		s, err := chromedp.Run(bctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	limiterText := text(`div[data-limiter="inbox-daily"] h3`)
	rowText := text(keyRow)
	isolates := text(`#isolates tbody`)
	cls, err := chromedp.Run(bctx, chromedp.AttributeValue(keyRow, "class"))
	if err != nil {
		t.Fatal(err)
	}
	rowClass := cls.Value
	browsertest.Screenshot(t, bctx, "ui.png")
	if !strings.Contains(limiterText, "fixed_window") || !strings.Contains(limiterText, "24h0m0s") ||
		!strings.Contains(limiterText, "approximate") {
		t.Errorf("limiter heading %q lacks algorithm, period or mode", limiterText)
	}
	// key, count 9, limit 10, remaining 1, 90% used: over 80%, highlighted.
	if f := strings.Fields(rowText); len(f) < 5 || f[0] != "alice@example.com" || f[1] != "9" || f[2] != "10" ||
		f[3] != "1" || f[4] != "90%" {
		t.Errorf("key row %q, want alice@example.com 9 10 1 90%% ...", rowText)
	}
	if rowClass != "near" {
		t.Errorf("key at 90%% not highlighted: class %q", rowClass)
	}
	if !strings.Contains(isolates, "ui-edge-0") || !strings.Contains(isolates, "ago") {
		t.Errorf("isolates table %q lacks ui-edge-0 and its sync age", isolates)
	}

	err = chromedp.Do(bctx,
		chromedp.Click(keyRow+` button.reset`),
		chromedp.WaitNotPresent(keyRow),
	)
	if err != nil {
		t.Fatalf("reset from the page: %v", err)
	}
	select {
	case msg := <-confirmed:
		if !strings.Contains(msg, "alice@example.com") {
			t.Errorf("confirmation %q does not name the key", msg)
		}
	default:
		t.Error("the reset asked no confirmation")
	}
	if n := keyCount(); n != 0 {
		t.Fatalf("after the page's reset the coordinator counts %d, want 0", n)
	}
}

// TestUIResetsAnyKey is issue 21's dashboard probe in headless Chromium:
// keys that are not UTF-8, ".", "..", "/", "%" and a 256-byte key are each
// reset from the page's button, and each reset clears that key (read
// back by its bytes) and leaves the others, where the page used to send
// the key's text in the path (the invalid-UTF-8 key reset "\ufffd", the
// dot segments were normalised away by the browser).
func TestUIResetsAnyKey(t *testing.T) {
	bctx := browsertest.Start(t)
	cfg := wire.Config{Version: wire.Version, Limiters: []wire.LimiterConfig{
		{Name: "api", Algorithm: wire.FixedWindow, Limit: 1000, Period: int64(24 * time.Hour)}}}
	const token = "ui-test-token"
	c, err := coordinator.Open(coordinator.Options{InMemory: true, Config: cfg, Tokens: []string{token}})
	if err != nil {
		t.Fatal(err)
	}
	curl := serveLoopback(t, c)
	keys := []string{"\xff\xfeab", ".", "..", "/", "a/b", "100%", "%2e%2e", "\xef\xbf\xbd", strings.Repeat("\xffk/.", wire.MaxKeyLen/4)}
	now := time.Now().UnixNano()
	b := &wire.Batch{Version: wire.Version, Isolate: "ui-edge", Secret: strings.Repeat("s", 32), Seq: 1, At: now}
	for _, k := range append([]string{"keep"}, keys...) {
		b.Entries = append(b.Entries, wire.Delta{Limiter: "api", Key: k, Window: now / int64(24*time.Hour), Delta: 3, Demand: 3})
	}
	if st := postBatch(t, curl, token, b); st != 200 {
		t.Fatalf("sync: %d", st)
	}
	count := func(k string) int64 {
		ks, err := c.KeyState(context.Background(), "api", k)
		if err != nil {
			t.Fatal(err)
		}
		return ks.Count
	}
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
	rowOf := func(k string) chromedp.CSS {
		return chromedp.CSS(`div[data-limiter="api"] tr[data-key-b64="` + base64.RawURLEncoding.EncodeToString([]byte(k)) + `"]`)
	}
	err = chromedp.Do(bctx,
		pageLogin(curl, token),
		chromedp.WaitVisible(rowOf("keep")),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	for i, k := range keys {
		// The page redraws its tables as it polls: a click can lose its
		// node between the query and the click ("Could not find node").
		// Then the reset either happened (the count says so) or is
		// clicked again.
		for attempt := 1; ; attempt++ {
			err := chromedp.Do(bctx, chromedp.Click(rowOf(k)+` button.reset`), chromedp.WaitNotPresent(rowOf(k)))
			if err == nil || strings.Contains(err.Error(), "Could not find node") && count(k) == 0 {
				break
			}
			if attempt == 3 || !strings.Contains(err.Error(), "Could not find node") {
				t.Fatalf("reset of %q from the page: %v", k, err)
			}
		}
		if n := count(k); n != 0 {
			t.Fatalf("key %q counts %d after the page reset it, want 0", k, n)
		}
		for _, other := range append([]string{"keep"}, keys[i+1:]...) {
			if n := count(other); n != 3 {
				t.Fatalf("key %q counts %d after the page reset %q, want 3", other, n, k)
			}
		}
	}
}
