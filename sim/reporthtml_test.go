package sim

import (
	"bytes"
	"html"
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

// htmlTestReport is a small sweep as Sweep returns it: five swept
// strategies (two +feedback ones among them) at three intervals, and
// local-only (6,300% over: off the overrun chart) and central repeated for
// each interval; auto at 100ms has a timeline of 60 windows, every tenth
// one over the limit.
func htmlTestReport() Report {
	sc := &Scenario{Name: "ui <test>", Description: "shared key & <b>not bold</b>"}
	var rs []Result
	ivs := []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second}
	add := func(strategy string, sync time.Duration, worst, util, syncs float64, wait time.Duration) {
		rs = append(rs, Result{Scenario: sc.Name, Strategy: strategy, Sync: Duration(sync), Requests: 1000,
			Admitted: 600, Denied: 400, WorstOverrunPct: worst, Utilisation: util, SyncPerSec: syncs, WaitP99: Duration(wait)})
	}
	for _, d := range ivs {
		add(LocalOnly, d, 6300, 6400, 0, 0)
	}
	for _, d := range ivs {
		add(Central, d, 0, 100, 10000, 40*time.Millisecond)
	}
	for i, d := range ivs {
		add(Approximate, d, float64(i)*5, 98-float64(i), 600/float64(i+1), 0)
	}
	for i, d := range ivs {
		add(Strict, d, 0, 100, 700/float64(i+1), time.Duration(i+1)*20*time.Millisecond)
	}
	for i, d := range ivs {
		add(Auto, d, 0, 100, 700/float64(i+1), time.Duration(i+1)*20*time.Millisecond)
	}
	for i, d := range ivs {
		add(Approximate+FeedbackSuffix, d, float64(i)*3, 99, 650/float64(i+1), 0)
	}
	for i, d := range ivs {
		add(Strict+FeedbackSuffix, d, 0, 99.5, 720/float64(i+1), time.Duration(i+1)*25*time.Millisecond)
	}
	tl := &Timeline{Limiter: "api", Key: "k0", Period: Duration(time.Second), Limit: 100, First: 0}
	for i := 0; i < htmlTestWindows; i++ {
		a := int64(95)
		if i%10 == 3 {
			a = 130
		}
		tl.Admitted, tl.Offered = append(tl.Admitted, a), append(tl.Offered, 200)
	}
	for i := range rs {
		if rs[i].Strategy == Auto && rs[i].Sync == Duration(100*time.Millisecond) {
			rs[i].Timeline = tl
		}
	}
	return Report{Scenario: sc, Results: rs}
}

// htmlTestWindows is the windows of htmlTestReport's timeline; every tenth
// is over the limit.
const (
	htmlTestWindows = 60
	htmlTestOver    = 6
	// htmlTestSeries: the strategies of htmlTestReport; htmlTestRows the
	// rows of its table (one each for local-only and central).
	htmlTestSeries = 7
	htmlTestRows   = 2 + 5*3
)

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
	if n := strings.Count(page, "<tr><td>"); n != htmlTestRows {
		t.Fatalf("%d table rows, want %d (local-only and central once)", n, htmlTestRows)
	}
	for _, id := range []string{"overrun", "utilisation", "sync", "frontier-util", "frontier-wait", "timeline"} {
		if !strings.Contains(page, `id="chart-`+id+`"`) {
			t.Fatalf("chart %s missing", id)
		}
	}
	charts := chartsOf(page)
	// Every polyline point lies inside its chart's plot; against the
	// interval, swept strategies have one point per interval and the
	// others a dashed line of two; on the frontier one point per run.
	re := regexp.MustCompile(`data-strategy="([a-z0-9&#;+-]+)" data-points="(\d+)" points="([^"]*)" fill="none" stroke="([^"]+)"`)
	for id, svg := range charts {
		lines := re.FindAllStringSubmatch(svg, -1)
		want := htmlTestSeries
		if id == "timeline" {
			want = 2 // offered, admitted
		}
		if len(lines) != want {
			t.Fatalf("%s: %d series, want %d", id, len(lines), want)
		}
		colors := map[string]string{}
		for _, m := range lines {
			m[1] = html.UnescapeString(m[1])
			pts := strings.Fields(m[3])
			n := 3
			switch {
			case id == "timeline":
				n = htmlTestWindows
			case m[1] == LocalOnly || m[1] == Central:
				n = 2
				if strings.HasPrefix(id, "frontier") {
					n = 1
				}
			}
			if len(pts) != n || m[2] != strconv.Itoa(n) {
				t.Fatalf("%s %s: %d points (data-points %s), want %d", id, m[1], len(pts), m[2], n)
			}
			w := float64(chartW)
			if id == "timeline" {
				w = 2*chartW - chartR
			}
			for _, p := range pts {
				x, y, _ := strings.Cut(p, ",")
				fx, err1 := strconv.ParseFloat(x, 64)
				fy, err2 := strconv.ParseFloat(y, 64)
				if err1 != nil || err2 != nil || fx < chartL-0.1 || fx > w-chartR+0.1 || fy < chartT-0.1 || fy > chartH-chartB+0.1 {
					t.Fatalf("%s %s: point %s outside the plot", id, m[1], p)
				}
			}
			if other, dup := colors[m[4]]; dup {
				t.Fatalf("%s: %s and %s share the colour %s", id, other, m[1], m[4])
			}
			colors[m[4]] = m[1]
		}
	}
	// local-only's 6,300% is off the overrun chart and the frontier: clipped
	// and marked, and the axis is set by the swept strategies (at most 10%).
	for _, id := range []string{"overrun", "utilisation", "frontier-util", "frontier-wait"} {
		if !strings.Contains(charts[id], `class="clipped" data-strategy="local-only"`) {
			t.Errorf("%s: local-only not marked as clipped", id)
		}
		if strings.Contains(charts[id], `class="clipped" data-strategy="approximate"`) {
			t.Errorf("%s: a swept strategy clipped", id)
		}
	}
	if strings.Contains(charts["sync"], `class="clipped"`) {
		t.Error("the log-scale sync chart clipped a point")
	}
	if strings.Contains(charts["overrun"], ">6300<") || !strings.Contains(charts["overrun"], "local-only: 6300 (off the chart)") {
		t.Error("the overrun axis reaches local-only's 6300%, or its marker does not say its value")
	}
	if !regexp.MustCompile(`class="clipped-label"[^>]*>local-only 6300 &#8593;</text>`).MatchString(charts["overrun"]) {
		t.Error("the clipped local-only line is not labelled with its value")
	}
	// The timeline: the limit line, one point per window, the windows over the limit marked.
	if !strings.Contains(charts["timeline"], `class="limit"`) || strings.Count(charts["timeline"], `class="over"`) != htmlTestOver {
		t.Errorf("timeline: limit line or %d over-limit markers missing", htmlTestOver)
	}
	// The sync panel is log scale: decade ticks from 100 (strict's 233/s) to 10,000 (central).
	for _, tick := range []string{">100<", ">1000<", ">10000<"} {
		if !strings.Contains(charts["sync"], tick) {
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
	if !strings.Contains(buf.String(), `id="no-timeline"`) {
		t.Error("a report without timelines does not say so")
	}
}

// chartsOf returns each chart's SVG in page, by id.
func chartsOf(page string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(page, `<figure id="chart-`)[1:] {
		id, rest, _ := strings.Cut(part, `"`)
		out[id], _, _ = strings.Cut(rest, "</figure>")
	}
	return out
}

// TestTimelineChoice: the chosen run, the default (auto nearest 100 ms,
// the tuner's pick), and choices that name no recorded run.
func TestTimelineChoice(t *testing.T) {
	rs := htmlTestReport().Results
	if r, ok := TimelineChoice(rs, "", nil); !ok || r.Strategy != Auto || r.Sync != Duration(100*time.Millisecond) {
		t.Fatalf("default: %s at %v %v", r.Strategy, r.Sync, ok)
	}
	for i := range rs {
		rs[i].Timeline = &Timeline{Limit: 1, Admitted: []int64{1}, Offered: []int64{1}}
	}
	for choice, want := range map[string]string{"strict@1s": "strict 1s", "local-only": "local-only 10ms", "central@5s": "central 10ms",
		"auto@0.1s": "auto 100ms", "": "auto 100ms"} {
		r, ok := TimelineChoice(rs, choice, nil)
		if got := r.Strategy + " " + time.Duration(r.Sync).String(); !ok || got != want {
			t.Errorf("%q: %s %v, want %s", choice, got, ok, want)
		}
	}
	tu := &Tuning{Strategy: Strict + FeedbackSuffix, Found: true, Interval: Duration(10 * time.Millisecond)}
	if r, ok := TimelineChoice(rs, "", tu); !ok || r.Strategy != Strict+FeedbackSuffix || r.Sync != tu.Interval {
		t.Errorf("with the tuner's pick: %s at %v", r.Strategy, r.Sync)
	}
	for _, bad := range []string{"strict@3s", "nope@1s", "auto", "auto@-1s", "auto@x"} {
		if _, ok := TimelineChoice(rs, bad, nil); ok {
			t.Errorf("%q chose a run", bad)
		}
	}
	if _, _, err := ParseTimelineChoice("auto"); err == nil || !strings.Contains(err.Error(), "auto@100ms") {
		t.Errorf("auto without an interval: %v", err)
	}
}

// TestReportHTMLInBrowser opens report.html from file:// in headless
// Chromium and checks what it renders: one table row for local-only and
// central; in every chart one drawn series per strategy, each in a colour
// of its own (as the browser computes it); local-only's clipped points
// marked inside the plot; the timeline's admitted line with one point per
// window, above the limit line exactly where a window is over the limit.
// It writes out/report.png, out/report-overrun.png and
// out/report-timeline.png.
func TestReportHTMLInBrowser(t *testing.T) {
	ctx := browsertest.Start(t)
	path := filepath.Join(t.TempDir(), "report.html")
	var buf bytes.Buffer
	rep := htmlTestReport()
	if err := WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path),
		chromedp.WaitVisible(chromedp.CSS("#chart-timeline svg"))); err != nil {
		t.Fatal(err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#results tbody tr td:first-child")).map(td => td.textContent)`))
	if err != nil || len(rows) != htmlTestRows {
		t.Fatalf("table rows: %d %v, want %d", len(rows), err, htmlTestRows)
	}
	if n := strings.Count(strings.Join(rows, " "), LocalOnly); n != 1 {
		t.Fatalf("local-only has %d rows, want 1: %q", n, rows)
	}
	type seriesInfo struct {
		Chart, Name, Stroke string
		Width, Height       float64
		Points              int
	}
	series, err := chromedp.Run(ctx, chromedp.Evaluate[[]seriesInfo](`Array.from(document.querySelectorAll("figure.chart")).flatMap(f =>
		Array.from(f.querySelectorAll("polyline.series")).map(p => ({Chart: f.id, Name: p.dataset.strategy,
			Stroke: getComputedStyle(p).stroke, Width: p.getBBox().width, Height: p.getBBox().height, Points: p.points.numberOfItems})))`))
	if err != nil {
		t.Fatal(err)
	}
	byChart := map[string][]seriesInfo{}
	for _, s := range series {
		byChart[s.Chart] = append(byChart[s.Chart], s)
	}
	if len(byChart) != 6 {
		t.Fatalf("%d charts rendered, want 6: %v", len(byChart), byChart)
	}
	for chart, ss := range byChart {
		want := htmlTestSeries
		if chart == "chart-timeline" {
			want = 2
		}
		if len(ss) != want {
			t.Fatalf("%s: %d series, want %d", chart, len(ss), want)
		}
		strokes := map[string]string{}
		for _, s := range ss {
			if prev, ok := strokes[s.Stroke]; ok {
				t.Errorf("%s: %s and %s are both drawn in %s", chart, prev, s.Name, s.Stroke)
			}
			strokes[s.Stroke] = s.Name
			// Against the interval every line spans the plot; a frontier
			// point of a strategy without an interval is a lone point.
			if !strings.HasPrefix(chart, "chart-frontier") && s.Width < 100 {
				t.Errorf("%s: %s rendered %v px wide", chart, s.Name, s.Width)
			}
		}
	}
	// local-only's markers: inside the SVG, at the plot's top edge.
	marks, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`Array.from(document.querySelectorAll("#chart-overrun path.clipped")).map(p => p.getBBox().y)`))
	if err != nil || len(marks) != 1 || marks[0] < 0 || marks[0] > chartT+2 {
		t.Fatalf("overrun chart clipped markers at y %v (%v), want one at the top", marks, err)
	}
	// The timeline: one point per window, over the limit line exactly where admitted > limit.
	type timelineInfo struct {
		Points []float64
		LimitY float64
		Over   int
	}
	tli, err := chromedp.Run(ctx, chromedp.Evaluate[timelineInfo](`(() => {
		const p = document.querySelector('#chart-timeline polyline[data-strategy="admitted"]');
		const ys = []; for (let i = 0; i < p.points.numberOfItems; i++) ys.push(p.points.getItem(i).y);
		return {Points: ys, LimitY: document.querySelector("#chart-timeline line.limit").y1.baseVal.value,
			Over: document.querySelectorAll("#chart-timeline circle.over").length};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	tl := rep.Results[len(rep.Results)-1].Timeline
	for _, r := range rep.Results {
		if r.Timeline != nil {
			tl = r.Timeline
		}
	}
	if len(tli.Points) != len(tl.Admitted) || tli.Over != htmlTestOver {
		t.Fatalf("timeline: %d points and %d over-limit marks, want %d and %d", len(tli.Points), tli.Over, len(tl.Admitted), htmlTestOver)
	}
	for i, y := range tli.Points {
		if above := y < tli.LimitY; above != (tl.Admitted[i] > tl.Limit) {
			t.Fatalf("window %d: admitted %d (limit %d) drawn at y %v, the limit line at %v", i, tl.Admitted[i], tl.Limit, y, tli.LimitY)
		}
	}
	title, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("h1")))
	if err != nil || title != "edgelimit sim: ui <test>" {
		t.Fatalf("title %q %v", title, err)
	}
	browsertest.Screenshot(t, ctx, "report.png")
	for _, id := range []string{"overrun", "timeline"} {
		png, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS("#chart-"+id)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(browsertest.OutDir(t), "report-"+id+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
