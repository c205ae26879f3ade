// Package browsertest starts headless Chromium for tests that check pages
// in a real browser (the coordinator's /ui, the simulator's report.html).
// Chromium is the Debian package `chromium`, installed by `make tools`
// (scripts/install-chromium.sh); a test skips with a clear message when
// no Chromium binary can be found.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Timeout bounds one browser session: 60 s.
const Timeout = 60 * time.Second

// Find returns the path of a Chromium binary: $CHROMIUM when set, else the
// first of chromium, chromium-browser, google-chrome on PATH; "" if none.
func Find() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// Start starts headless Chromium and returns a browser context bounded by
// Timeout, closed (and Chromium stopped) at the end of t. It skips t when
// no Chromium is installed.
func Start(t testing.TB) context.Context {
	t.Helper()
	bin := Find()
	if bin == "" {
		t.Skip("browsertest: no Chromium found (run `make tools`, which installs the Debian package chromium, or set CHROMIUM)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	if os.Geteuid() == 0 { // Chromium refuses to run its sandbox as root
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	tctx, cancelT := context.WithTimeout(actx, Timeout)
	ctx, cancelB := chromedp.NewContext(tctx)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		cancelB()
		cancelT()
		cancelA()
		t.Fatalf("browsertest: start %s: %v", bin, err)
	}
	t.Cleanup(func() { cancelB(); cancelT(); cancelA() })
	return ctx
}

// OutDir returns the repository's out/ directory (created; gitignored),
// where tests write screenshots for CI to keep.
func OutDir(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	return dir
}

// Screenshot writes a full-page PNG of the current page to out/name.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browsertest: screenshot: %v", err)
	}
	p := filepath.Join(OutDir(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	t.Logf("screenshot: %s", p)
	return p
}
