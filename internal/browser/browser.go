// Package browser drives headless Chromium (through chromedp) for the tests
// of the pages the project serves: the coordinator's dashboard and the
// simulator's report. Chromium comes from Debian (`make tools` installs
// it); New reports ErrNoChromium when it is missing so tests can skip with
// a clear message.
package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"log"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// ErrNoChromium reports that no Chromium binary was found.
var ErrNoChromium = errors.New("browser: chromium not found (make tools installs it)")

// Find returns the path of a Chromium binary.
func Find() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// New starts a headless Chromium tab that accepts every JavaScript dialog
// (confirm, alert) and returns its context, bounded by timeout, and a
// function that closes it.
func New(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc, error) {
	bin, err := Find()
	if err != nil {
		return nil, nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 1000))
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	// cdproto may not know every enum a newer Chromium sends in events
	// the tests do not use; those decode errors are not worth a log line.
	tctx, cancelT := chromedp.NewContext(actx, chromedp.WithErrorf(func(format string, args ...any) {
		if !strings.HasPrefix(format, "could not unmarshal event") {
			log.Printf(format, args...)
		}
	}))
	tctx, cancelTO := context.WithTimeout(tctx, timeout)
	chromedp.ListenTarget(tctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			go chromedp.Run(tctx, page.HandleJavaScriptDialog(true))
		}
	})
	return tctx, func() { cancelTO(); cancelT(); cancelA() }, nil
}

// Screenshot writes a PNG of the whole page of tab ctx to path (its
// directory is created).
func Screenshot(ctx context.Context, path string) error {
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 90)); err != nil {
		return fmt.Errorf("browser: screenshot: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("browser: %w", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		return fmt.Errorf("browser: %w", err)
	}
	return nil
}
