package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/edgelimit/edgelimit/internal/browsertest"
)

// htmlTestReport is a small sweep: two swept strategies at three intervals
// and the two reference strategies.
func htmlTestReport() Report {
	sc := &Scenario{Name: "ui <test>", Description: "shared key & <b>not bold</b>"}
	var rs []Result
	add := func(strategy string, sync time.Duration, worst, util, syncs float64) {
		rs = append(rs, Result{Scenario: sc.Name, Strategy: strategy, Sync: Duration(sync), Requests: 1000,
			Admitted: 600, Denied: 400, WorstOverrunPct: worst, Utilisation: util, SyncPerSec: syncs})
	}
	add(LocalOnly, 100*time.Millisecond, 100, 200, 0)
	add(Central, 100*time.Millisecond, 0, 100, 10000)
	for i, d := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second} {
		add(Approximate, d, float64(i)*5, 98-float64(i), 600/float64(i+1))
		add(Strict, d, 0, 100, 700/float64(i+1))
	}
	return Report{Scenario: sc, Results: rs}
}

func TestWriteHTML(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteHTML(&buf, htmlTestReport()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if strings.Contains(page, "<b>not bold</b>") || strings.Contains(page, "ui <test>") ||
		!strings.Contains(page, "ui &lt;test&gt;") {
		t.Fatal("scenario text not escaped")
	}
	if strings.Contains(page, "http://") && !strings.Contains(page, `xmlns="http://www.w3.org/2000/svg"`) ||
		strings.Contains(page, "https://") || strings.Contains(page, "<script") {
		t.Fatal("the report must be self-contained (no external resources, no script)")
	}
	if n := strings.Count(page, "<tr><td>"); n != 8 {
		t.Fatalf("%d table rows, want 8", n)
	}
	for _, id := range []string{"overrun", "utilisation", "sync"} {
		if !strings.Contains(page, `id="chart-`+id+`"`) {
			t.Fatalf("chart %s missing", id)
		}
	}
	// Every polyline point lies inside the chart; swept strategies have one
	// point per interval, reference ones a dashed line of two.
	re := regexp.MustCompile(`data-strategy="([a-z-]+)" points="([^"]*)"`)
	lines := re.FindAllStringSubmatch(page, -1)
	if len(lines) != 3*4 {
		t.Fatalf("%d polylines, want 4 strategies x 3 charts", len(lines))
	}
	for _, m := range lines {
		pts := strings.Fields(m[2])
		want := 3
		if m[1] == LocalOnly || m[1] == Central {
			want = 2
		}
		if len(pts) != want {
			t.Fatalf("%s: %d points, want %d", m[1], len(pts), want)
		}
		for _, p := range pts {
			x, y, _ := strings.Cut(p, ",")
			fx, err1 := strconv.ParseFloat(x, 64)
			fy, err2 := strconv.ParseFloat(y, 64)
			if err1 != nil || err2 != nil || fx < chartL || fx > chartW-chartR || fy < chartT || fy > chartH-chartB {
				t.Fatalf("%s: point %s outside the plot", m[1], p)
			}
		}
	}
	// The sync panel is log scale: decade ticks from 100 (strict's 233/s) to 10,000 (central).
	syncPanel := page[strings.Index(page, `id="chart-sync"`):]
	for _, tick := range []string{">100<", ">1000<", ">10000<"} {
		if !strings.Contains(syncPanel, tick) {
			t.Fatalf("sync panel lacks the decade tick %s", tick)
		}
	}
	if strings.Contains(page, `id="upstream"`) {
		t.Fatal("an upstream table for a scenario without an upstream")
	}
	// With an upstream, its table has a row per result that has figures.
	rep := htmlTestReport()
	rep.Results[0].UpstreamAccepted, rep.Results[0].Upstream429, rep.Results[0].UpstreamUtilisation = 360, 17, 97.5
	buf.Reset()
	if err := WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	up := buf.String()
	i := strings.Index(up, `id="upstream"`)
	if i < 0 || !strings.Contains(up[i:], "<td>360</td><td>17</td><td>0</td><td>97.50%</td>") {
		t.Fatal("the upstream table lacks the result's figures")
	}
	// The tuner's bounds and curve, with what each interval misses.
	rep = htmlTestReport()
	rep.Tuning = &Tuning{Strategy: Strict, Metric: MetricWorst, Target: 1, MaxWait: Duration(40 * time.Millisecond),
		MinUtil: 97, Curve: []TunePoint{
			{Interval: Duration(10 * time.Millisecond), WaitP99: Duration(41943039), Utilisation: 99, Meets: true},
			{Interval: Duration(time.Second), WaitP50: Duration(20 * time.Millisecond), WaitP99: Duration(125829119),
				WaitedPct: 30, Utilisation: 95, Misses: []string{"wait", "util"}}}}
	rep.Tuning.Found, rep.Tuning.Interval = true, rep.Tuning.Curve[0].Interval
	buf.Reset()
	if err := WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	tu := buf.String()
	for _, want := range []string{"wait p99 at most 40ms, utilisation at least 97%", "meets every bound is 10ms",
		"<td>1s</td><td>0.00%</td><td>30.00%</td><td>20ms</td><td>125.83ms</td><td>95.00%</td><td>no: wait, util</td>"} {
		if !strings.Contains(tu, want) {
			t.Errorf("the tuning section lacks %q", want)
		}
	}
	buf.Reset()
	if err := WriteHTML(&buf, Report{}); err != nil {
		t.Fatalf("empty report: %v", err)
	}
}

// TestReportHTMLInBrowser opens report.html from file:// in headless
// Chromium and checks that the table and the three charts render (each
// series has a drawn, non-empty box). It writes out/report.png.
func TestReportHTMLInBrowser(t *testing.T) {
	ctx := browsertest.Start(t)
	path := filepath.Join(t.TempDir(), "report.html")
	var buf bytes.Buffer
	if err := WriteHTML(&buf, htmlTestReport()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path),
		chromedp.WaitVisible(chromedp.CSS("#chart-sync svg"))); err != nil {
		t.Fatal(err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#results tbody tr").length`))
	if err != nil || rows != 8 {
		t.Fatalf("table rows: %d %v, want 8", rows, err)
	}
	// Series drawn with a width: swept ones span the plot, a flat reference line has height 0.
	drawn, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`Array.from(document.querySelectorAll("polyline.series")).map(p => p.getBBox().width)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(drawn) != 12 {
		t.Fatalf("%d series rendered, want 12", len(drawn))
	}
	for i, w := range drawn {
		if w < 100 {
			t.Fatalf("series %d rendered %v px wide", i, w)
		}
	}
	title, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1")))
	if err != nil || title != "edgelimit sim: ui <test>" {
		t.Fatalf("title %q %v", title, err)
	}
	browsertest.Screenshot(t, ctx, "report.png")
}
