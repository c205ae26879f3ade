package sim

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WriteHTML writes rep as one self-contained HTML page (report.html of
// `edgelimit sim --out`), readable offline and without script: the
// scenario, the results table (one row for each strategy without a sync
// interval: local-only, central), and inline SVG charts:
//   - against the sync interval (log scale), one series per strategy:
//     worst-window overrun (% of the limit), utilisation (%) and sync
//     requests per second (log scale). Strategies without an interval are
//     dashed horizontal lines. The linear axes are set by the swept
//     strategies: a value more than outlierFactor times their largest
//     (local-only's overrun) is drawn clipped at the edge, marked with a
//     triangle whose title gives it;
//   - the frontier: worst-window overrun against utilisation and against
//     the wait p99, one point per run, a swept strategy's points joined in
//     interval order;
//   - the timeline of rep.TimelineOf (see TimelineChoice): what its key
//     admitted in each window against the limit line, when recorded
//     (SweepOptions.Timeline).
//
// Every series has a colour of its own (seriesColors).
func WriteHTML(w io.Writer, rep Report) error {
	page := htmlPage{Title: "edgelimit sim", Results: rep.Results, Tuning: rep.Tuning, Legend: Legend}
	if rep.Scenario != nil {
		page.Title += ": " + rep.Scenario.Name
		page.Description = rep.Scenario.Description
		b, err := json.MarshalIndent(rep.Scenario, "", "  ")
		if err != nil {
			return fmt.Errorf("sim: html: %w", err)
		}
		page.ScenarioJSON = string(b)
	}
	rs := onePerFixedStrategy(rep.Results)
	for _, r := range rs {
		page.Rows = append(page.Rows, htmlRow{Strategy: r.Strategy, Sync: syncLabel(r),
			Overrun: pct(r.OverrunPct), Worst: pct(r.WorstOverrunPct), Util: pct(r.Utilisation),
			Unserved: pct(r.UnservedPct), SyncPerSec: strconv.FormatFloat(r.SyncPerSec, 'f', 1, 64),
			SyncPerDecision: pct(r.SyncPerDecision), Stranded: pct(r.StrandedPct), Waited: pct(r.WaitedPct),
			P50: fmtDur(int64(r.WaitP50)), P99: fmtDur(int64(r.WaitP99)),
			Requests: r.Requests, Admitted: r.Admitted, Denied: r.Denied})
		if r.UpstreamAccepted+r.Upstream429+r.UpstreamFailed > 0 {
			page.Upstream = append(page.Upstream, htmlUpRow{Strategy: r.Strategy, Sync: syncLabel(r), OK: r.UpstreamAccepted,
				R429: r.Upstream429, R503: r.UpstreamFailed, Util: pct(r.UpstreamUtilisation), Windows: r.UpstreamPauseEvents,
				Worst: r.Upstream429WorstIsolate})
		}
	}
	if t := rep.Tuning; t != nil {
		page.TuneBounds = fmt.Sprintf("%s key-window overrun at most %g%%", t.Metric, t.Target)
		if t.MaxWait >= 0 {
			page.TuneBounds += ", wait p99 at most " + time.Duration(t.MaxWait).String()
		}
		if t.MinUtil >= 0 {
			page.TuneBounds += fmt.Sprintf(", utilisation at least %g%%", t.MinUtil)
		}
		page.TunePick = time.Duration(t.Interval).String()
		for _, p := range t.Curve {
			meets := "yes"
			if !p.Meets {
				meets = "no: " + strings.Join(p.Misses, ", ")
			}
			page.TuneRows = append(page.TuneRows, htmlTuneRow{Interval: time.Duration(p.Interval).String(),
				Metric: pct(p.Metric), Waited: pct(p.WaitedPct), P50: p.WaitP50.Short(), P99: p.WaitP99.Short(),
				Util: pct(p.Utilisation), Meets: meets})
		}
	}
	var order []string
	for _, r := range rs {
		if !slices.Contains(order, r.Strategy) {
			order = append(order, r.Strategy)
		}
	}
	colors := seriesColors(order)
	page.Charts = []htmlChart{
		intervalChart("worst-window overrun (% of the limit)", "overrun", rs, order, colors, false,
			func(r Result) float64 { return r.WorstOverrunPct }),
		intervalChart("utilisation (% of what the limit allows)", "utilisation", rs, order, colors, false,
			func(r Result) float64 { return r.Utilisation }),
		intervalChart("sync requests per second (log scale)", "sync", rs, order, colors, true,
			func(r Result) float64 { return r.SyncPerSec }),
	}
	page.Frontier = []htmlChart{
		frontierChart("worst-window overrun against utilisation", "frontier-util", rs, order, colors,
			"utilisation (%)", false, func(r Result) float64 { return r.Utilisation }),
		frontierChart("worst-window overrun against the wait p99", "frontier-wait", rs, order, colors,
			"wait p99 (ms)", true, func(r Result) float64 { return float64(r.WaitP99) / 1e6 }),
	}
	if r, ok := TimelineChoice(rs, rep.TimelineOf, rep.Tuning); ok {
		ch := timelineChart(r, colors[r.Strategy])
		page.Timeline = &ch
	}
	if err := htmlTmpl.Execute(w, page); err != nil {
		return fmt.Errorf("sim: html: %w", err)
	}
	return nil
}

func pct(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "%" }

// onePerFixedStrategy returns rs with one result for each strategy without
// a sync interval (Sweep repeats local-only's and central's for every
// interval).
func onePerFixedStrategy(rs []Result) []Result {
	var out []Result
	seen := map[string]bool{}
	for _, r := range rs {
		if !swept(r) {
			if seen[r.Strategy] {
				continue
			}
			seen[r.Strategy] = true
		}
		out = append(out, r)
	}
	return out
}

type htmlPage struct {
	Title, Description, ScenarioJSON string
	Legend                           string // the columns, as under the text table
	TuneBounds                       string // the tuner's bounds, when it ran
	TunePick                         string // the interval it picked
	TuneRows                         []htmlTuneRow
	Results                          []Result
	Tuning                           *Tuning
	Rows                             []htmlRow
	Upstream                         []htmlUpRow // scenarios with an upstream
	Charts                           []htmlChart // against the sync interval
	Frontier                         []htmlChart
	Timeline                         *htmlChart // nil: no timeline recorded
}

// htmlTuneRow is one scanned interval of the tuner.
type htmlTuneRow struct {
	Interval, Metric, Waited, P50, P99, Util, Meets string
}

// htmlUpRow is one row of the upstream table (see UpstreamLegend).
type htmlUpRow struct {
	Strategy, Sync, Util           string
	OK, R429, R503, Windows, Worst int64
}

type htmlRow struct {
	Strategy, Sync, Overrun, Worst, Util, Unserved, Stranded, SyncPerSec, SyncPerDecision, Waited, P50, P99 string
	Requests, Admitted, Denied                                                                              int64
}

// htmlChart is one SVG panel: W x H pixels, plot area inside the margins.
type htmlChart struct {
	Title, ID, XLabel, YLabel string
	Caption                   string // under the chart: what is clipped, what is drawn
	W, H                      int
	Series                    []htmlSeries
	XTicks, YTicks            []htmlTick
	Limit                     *htmlLimit // the timeline's limit line
	Empty                     bool
}

// htmlSeries is one series: a polyline (Points, N of them), its dots and
// its points drawn clipped at the plot's edge.
type htmlSeries struct {
	Name, Color, Points string
	N                   int
	Width               float64
	Dashed, Faint       bool
	Dots                []htmlDot
	Clipped             []htmlMark
}

type htmlDot struct {
	X, Y  float64
	Label string
	Class string // "point", or "over" (a timeline window over the limit)
}

// htmlMark is a point clipped at the plot's edge: a triangle (Path)
// pointing off the chart, its true value in Label (the triangle's title)
// and, for a line of a strategy without an interval, in Text beside it.
type htmlMark struct {
	X, Y, TX, TY      float64 // the mark; where Text goes
	Path, Label, Text string
}

type htmlTick struct {
	Pos   float64
	Label string
}

// htmlLimit is the timeline's limit line at height Y.
type htmlLimit struct {
	Y     float64
	Label string
}

// intervalChart lays out one panel against the sync interval: x the
// interval (log scale), y linear from 0 (clipping the outliers of the
// strategies without an interval, see linearRange), or with logY a log
// scale over the decades the positive values span, zeros on the axis.
func intervalChart(title, id string, rs []Result, order []string, colors map[string]string, logY bool, y func(Result) float64) htmlChart {
	ch := htmlChart{Title: title, ID: id, W: chartW, H: chartH, XLabel: "sync interval"}
	if len(rs) == 0 {
		ch.Empty = true
		return ch
	}
	xmin, xmax := math.Inf(1), math.Inf(-1)
	var core, extra, all []float64
	for _, r := range rs {
		v := y(r)
		all = append(all, v)
		if swept(r) {
			xmin, xmax = math.Min(xmin, float64(r.Sync)), math.Max(xmax, float64(r.Sync))
			core = append(core, v)
		} else {
			extra = append(extra, v)
		}
	}
	if math.IsInf(xmin, 1) { // no swept strategy: one arbitrary decade
		xmin, xmax = float64(100*time.Millisecond), float64(time.Second)
	}
	if xmax <= xmin {
		xmin, xmax = xmin/2, xmax*2
	}
	xs := scale{lo: xmin, hi: xmax, log: true, p0: chartL, p1: chartW - chartR}
	ys := scale{p0: chartH - chartB, p1: chartT}
	if logY {
		ys.lo, ys.hi = logRange(all)
		ys.log = true
	} else {
		ys.lo, ys.hi = linearRange(core, extra, true)
	}
	ch.YTicks = ys.ticks()
	for _, r := range rs {
		if p, _ := xs.at(float64(r.Sync)); swept(r) && !hasTick(ch.XTicks, p) {
			ch.XTicks = append(ch.XTicks, htmlTick{Pos: p, Label: time.Duration(r.Sync).String()})
		}
	}
	var clipped []string
	for i, s := range order {
		se := htmlSeries{Name: s, Color: colors[s], Width: seriesWidth(i, len(order))}
		var px, py []float64
		for _, r := range rs {
			if r.Strategy != s {
				continue
			}
			v := y(r)
			yp, clip := ys.at(v)
			if !swept(r) {
				se.Dashed = true
				x0, _ := xs.at(xmin)
				x1, _ := xs.at(xmax)
				px, py = []float64{x0, x1}, []float64{yp, yp}
				label := fmt.Sprintf("%s: %.4g", s, v)
				se.Dots = append(se.Dots, htmlDot{X: x1, Y: yp, Label: label, Class: "point"})
				if clip != 0 {
					m := clipMark(x1, yp, 0, clip, label+" (off the chart)")
					// One mark per line: room for its value, below (above) the edge, stacked.
					m.Text, m.TX, m.TY = fmt.Sprintf("%s %.4g", s, v), x1-10, yp+float64(clip)*(14+12*float64(len(clipped)))
					se.Clipped = append(se.Clipped, m)
					clipped = append(clipped, label)
				}
				break
			}
			xp, _ := xs.at(float64(r.Sync))
			px, py = append(px, xp), append(py, yp)
			label := fmt.Sprintf("%s at %s: %.4g", s, time.Duration(r.Sync), v)
			se.Dots = append(se.Dots, htmlDot{X: xp, Y: yp, Label: label, Class: "point"})
			if clip != 0 {
				se.Clipped = append(se.Clipped, clipMark(xp, yp, 0, clip, label+" (off the chart)"))
				clipped = append(clipped, label)
			}
		}
		se.Points, se.N = joinPoints(px, py), len(px)
		ch.Series = append(ch.Series, se)
	}
	if len(clipped) > 0 {
		ch.Caption = "Off the chart (drawn at its edge, marked with a triangle): " + strings.Join(clipped, "; ") + "."
	}
	return ch
}

// frontierChart lays out overrun (y) against another figure (x) of every
// run: a swept strategy's runs joined in interval order, a strategy
// without an interval one point. Both axes are linear, their range set
// by the swept strategies (outliers clipped, see linearRange).
func frontierChart(title, id string, rs []Result, order []string, colors map[string]string, xlabel string, xFromZero bool, x func(Result) float64) htmlChart {
	ch := htmlChart{Title: title, ID: id, W: chartW, H: chartH, XLabel: xlabel, YLabel: "worst-window overrun (%)"}
	if len(rs) == 0 {
		ch.Empty = true
		return ch
	}
	y := func(r Result) float64 { return r.WorstOverrunPct }
	var xc, xe, yc, ye []float64
	for _, r := range rs {
		if swept(r) {
			xc, yc = append(xc, x(r)), append(yc, y(r))
		} else {
			xe, ye = append(xe, x(r)), append(ye, y(r))
		}
	}
	xs := scale{p0: chartL, p1: chartW - chartR}
	xs.lo, xs.hi = linearRange(xc, xe, xFromZero)
	ys := scale{p0: chartH - chartB, p1: chartT}
	ys.lo, ys.hi = linearRange(yc, ye, true)
	ch.XTicks, ch.YTicks = xs.ticks(), ys.ticks()
	var clipped []string
	for i, s := range order {
		se := htmlSeries{Name: s, Color: colors[s], Width: seriesWidth(i, len(order))}
		var pts []Result
		for _, r := range rs {
			if r.Strategy == s {
				pts = append(pts, r)
			}
		}
		slices.SortStableFunc(pts, func(a, b Result) int { return int(a.Sync - b.Sync) })
		var px, py []float64
		for _, r := range pts {
			xp, cx := xs.at(x(r))
			yp, cy := ys.at(y(r))
			px, py = append(px, xp), append(py, yp)
			at := ""
			if swept(r) {
				at = " at " + time.Duration(r.Sync).String()
			}
			label := fmt.Sprintf("%s%s: overrun %.4g%%, %s %.4g", s, at, y(r), xlabel, x(r))
			se.Dots = append(se.Dots, htmlDot{X: xp, Y: yp, Label: label, Class: "point"})
			if cx != 0 || cy != 0 {
				se.Clipped = append(se.Clipped, clipMark(xp, yp, cx, cy, label+" (off the chart)"))
				clipped = append(clipped, label)
			}
		}
		se.Points, se.N = joinPoints(px, py), len(px)
		ch.Series = append(ch.Series, se)
	}
	ch.Caption = "One point per run; lower is better on y. "
	if len(clipped) > 0 {
		ch.Caption += "Off the chart (drawn at its edge, marked with a triangle): " + strings.Join(clipped, "; ") + "."
	}
	return ch
}

// timelineChart lays out r's Timeline: admitted per window (one point per
// window; windows over the limit marked), offered (faint) and the limit.
func timelineChart(r Result, color string) htmlChart {
	tl := r.Timeline
	at := ""
	if swept(r) {
		at = " at " + time.Duration(r.Sync).String()
	}
	ch := htmlChart{Title: fmt.Sprintf("admitted per window of %s, key %q: %s%s", time.Duration(tl.Period), tl.Key, r.Strategy, at),
		ID: "timeline", W: 2*chartW - chartR, H: chartH, XLabel: "time (s)", YLabel: "cost per window"}
	n := len(tl.Admitted)
	xs := scale{lo: 0, hi: float64(max(n-1, 1)), p0: chartL, p1: float64(ch.W - chartR)}
	ymax := float64(tl.Limit)
	for i := range tl.Admitted {
		ymax = math.Max(ymax, math.Max(float64(tl.Admitted[i]), float64(tl.Offered[i])))
	}
	ys := scale{lo: 0, hi: ymax * 1.1, p0: chartH - chartB, p1: chartT}
	if ys.hi <= 0 {
		ys.hi = 1
	}
	ch.YTicks = ys.ticks()
	// x ticks in seconds of simulated time (window i starts at (First+i) periods).
	secs := float64(tl.Period) / 1e9
	ts := scale{lo: float64(tl.First) * secs, hi: (float64(tl.First) + xs.hi) * secs}
	for _, v := range ts.tickValues() {
		p, _ := xs.at(v/secs - float64(tl.First))
		ch.XTicks = append(ch.XTicks, htmlTick{Pos: p, Label: tickLabel(v)})
	}
	adm := htmlSeries{Name: "admitted", Color: color, Width: 1.5, N: n}
	off := htmlSeries{Name: "offered", Color: "#999", Width: 1, Faint: true, N: n}
	var px, pa, po []float64
	over := 0
	for i := range tl.Admitted {
		xp, _ := xs.at(float64(i))
		ya, _ := ys.at(float64(tl.Admitted[i]))
		yo, _ := ys.at(float64(tl.Offered[i]))
		px, pa, po = append(px, xp), append(pa, ya), append(po, yo)
		if tl.Admitted[i] > tl.Limit {
			over++
			adm.Dots = append(adm.Dots, htmlDot{X: xp, Y: ya, Class: "over",
				Label: fmt.Sprintf("window %d: %d admitted, limit %d", tl.First+int64(i), tl.Admitted[i], tl.Limit)})
		}
	}
	adm.Points, off.Points = joinPoints(px, pa), joinPoints(px, po)
	ch.Series = []htmlSeries{off, adm}
	yl, _ := ys.at(float64(tl.Limit))
	ch.Limit = &htmlLimit{Y: yl, Label: fmt.Sprintf("limit %d", tl.Limit)}
	ch.Caption = fmt.Sprintf("%d windows of %s from %.4g s; %d over the limit (marked).", n, time.Duration(tl.Period),
		float64(tl.First)*float64(tl.Period)/1e9, over)
	if tl.Truncated {
		ch.Caption += fmt.Sprintf(" The run had more windows: the first %d are drawn.", MaxTimelineWindows)
	}
	return ch
}

// swept reports whether r's strategy has a sync interval to plot against.
func swept(r Result) bool { return r.Strategy != LocalOnly && r.Strategy != Central && r.Sync > 0 }

func hasTick(ts []htmlTick, pos float64) bool {
	for _, t := range ts {
		if math.Abs(t.Pos-pos) < 1 {
			return true
		}
	}
	return false
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"legendY": func(i int) int { return chartT + 10 + 18*i },
	"plotR":   func(ch htmlChart) int { return ch.W - chartR },
	"legendX": func(ch htmlChart) int { return ch.W - chartR + 10 },
	"plotB":   func() int { return chartH - chartB },
	"plotL":   func() int { return chartL },
	"plotT":   func() int { return chartT },
	"midX":    func(ch htmlChart) int { return (chartL + ch.W - chartR) / 2 },
	"midY":    func() int { return (chartT + chartH - chartB) / 2 },
	"dotR":    func(w float64) float64 { return w/2 + 2 }, // the widest series' dots under the others'

}).Parse(`{{define "chart"}}<figure id="chart-{{.ID}}" class="chart">
<figcaption>{{.Title}}</figcaption>
{{if .Empty}}<p>no results</p>{{else}}<svg xmlns="http://www.w3.org/2000/svg" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-label="{{.Title}}">
<line x1="{{plotL}}" y1="{{plotB}}" x2="{{plotR .}}" y2="{{plotB}}" stroke="#333"/>
<line x1="{{plotL}}" y1="{{plotT}}" x2="{{plotL}}" y2="{{plotB}}" stroke="#333"/>
{{range .YTicks}}<line x1="{{plotL}}" y1="{{.Pos}}" x2="{{plotR $}}" y2="{{.Pos}}" stroke="#eee"/><text x="{{plotL}}" y="{{.Pos}}" text-anchor="end" dx="-4" dy="4">{{.Label}}</text>
{{end}}{{range .XTicks}}<text x="{{.Pos}}" y="{{plotB}}" dy="16" text-anchor="middle">{{.Label}}</text>
{{end}}{{with .XLabel}}<text x="{{midX $}}" y="{{plotB}}" dy="32" text-anchor="middle" class="axis-label">{{.}}</text>
{{end}}{{with .YLabel}}<text transform="translate(12,{{midY}}) rotate(-90)" text-anchor="middle" class="axis-label">{{.}}</text>
{{end}}{{with .Limit}}<line class="limit" x1="{{plotL}}" y1="{{.Y}}" x2="{{plotR $}}" y2="{{.Y}}" stroke="#d62728" stroke-width="1.5" stroke-dasharray="8 4"/><text x="{{plotR $}}" y="{{.Y}}" dx="4" dy="4" fill="#d62728">{{.Label}}</text>
{{end}}{{range $i, $s := .Series}}<polyline class="series" data-strategy="{{$s.Name}}" data-points="{{$s.N}}" points="{{$s.Points}}" fill="none" stroke="{{$s.Color}}" stroke-width="{{$s.Width}}"{{if $s.Dashed}} stroke-dasharray="6 4"{{end}}{{if $s.Faint}} stroke-opacity="0.6"{{end}}/>
{{range $s.Dots}}<circle class="{{.Class}}" data-strategy="{{$s.Name}}" cx="{{.X}}" cy="{{.Y}}" r="{{dotR $s.Width}}" fill="{{$s.Color}}"><title>{{.Label}}</title></circle>
{{end}}{{range $s.Clipped}}<path class="clipped" data-strategy="{{$s.Name}}" d="{{.Path}}" fill="{{$s.Color}}" stroke="#000" stroke-width="0.5"><title>{{.Label}}</title></path>
{{if .Text}}<text class="clipped-label" x="{{.TX}}" y="{{.TY}}" text-anchor="end" fill="{{$s.Color}}">{{.Text}} {{if lt .TY .Y}}&#8595;{{else}}&#8593;{{end}}</text>
{{end}}{{end}}<rect class="legend" x="{{legendX $}}" y="{{legendY $i}}" width="12" height="4" fill="{{$s.Color}}" transform="translate(0,-4)"/><text x="{{legendX $}}" y="{{legendY $i}}" dx="18">{{$s.Name}}</text>
{{end}}</svg>{{with .Caption}}<p class="caption">{{.}}</p>{{end}}{{end}}
</figure>
{{end}}<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: .8em 0; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
pre { background: #f6f6f6; padding: .8em; overflow: auto; max-height: 24em; }
figure { margin: 1em 0; }
.caption { color: #555; font-size: 12px; max-width: 640px; }
svg text { font: 11px system-ui, sans-serif; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{with .Description}}<p>{{.}}</p>{{end}}
<h2>Results</h2>
<table id="results">
<thead><tr><th>strategy</th><th>sync</th><th>requests</th><th>admitted (cost)</th><th>denied (cost)</th><th>overrun</th><th>worst window</th><th>utilisation</th><th>unserved with room</th><th>stranded in leases</th><th>syncs/s</th><th>syncs per decision</th><th>waited</th><th>wait p50</th><th>wait p99</th></tr></thead>
<tbody>
{{range .Rows}}<tr><td>{{.Strategy}}</td><td>{{.Sync}}</td><td>{{.Requests}}</td><td>{{.Admitted}}</td><td>{{.Denied}}</td><td>{{.Overrun}}</td><td>{{.Worst}}</td><td>{{.Util}}</td><td>{{.Unserved}}</td><td>{{.Stranded}}</td><td>{{.SyncPerSec}}</td><td>{{.SyncPerDecision}}</td><td>{{.Waited}}</td><td>{{.P50}}</td><td>{{.P99}}</td></tr>
{{end}}</tbody>
</table>
<pre id="legend">{{.Legend}}</pre>
{{if .Upstream}}<h2>Upstream</h2>
<p>What the API behind the limiter did with the admitted requests: its answers, the use of its true limit (its 200s over min(offered, its limit) per key-window of its own), its key-windows with a 429, and the most 429s one isolate got in one of them.</p>
<table id="upstream">
<thead><tr><th>strategy</th><th>sync</th><th>ok</th><th>429</th><th>503</th><th>utilisation of its limit</th><th>429 windows</th><th>worst 429s per isolate</th></tr></thead>
<tbody>
{{range .Upstream}}<tr><td>{{.Strategy}}</td><td>{{.Sync}}</td><td>{{.OK}}</td><td>{{.R429}}</td><td>{{.R503}}</td><td>{{.Util}}</td><td>{{.Windows}}</td><td>{{.Worst}}</td></tr>
{{end}}</tbody>
</table>
{{end}}{{with .Tuning}}<h2>Tuning</h2>
<p id="tuning">Tuning {{.Strategy}} ({{$.TuneBounds}}, on every seed): {{if .Found}}the largest interval that meets every bound is {{$.TunePick}}{{else}}no interval scanned meets every bound; none is recommended{{end}}.</p>
<table id="tuning-curve">
<thead><tr><th>interval</th><th>{{.Metric}} window overrun</th><th>waited</th><th>wait p50</th><th>wait p99</th><th>utilisation</th><th>meets</th></tr></thead>
<tbody>
{{range $.TuneRows}}<tr><td>{{.Interval}}</td><td>{{.Metric}}</td><td>{{.Waited}}</td><td>{{.P50}}</td><td>{{.P99}}</td><td>{{.Util}}</td><td>{{.Meets}}</td></tr>
{{end}}</tbody>
</table>
{{end}}
<h2>Against the sync interval</h2>
<p>Strategies without a sync interval (local-only, central) are dashed lines across.</p>
{{range .Charts}}{{template "chart" .}}{{end}}
<h2>Frontier</h2>
<p>What each run paid for its overrun: utilisation (higher is better) and the wait p99 (lower is better).</p>
{{range .Frontier}}{{template "chart" .}}{{end}}
<h2>Timeline</h2>
{{with .Timeline}}{{template "chart" .}}{{else}}<p id="no-timeline">No timeline to draw: none of the runs recorded one, or none is the run --timeline names (edgelimit sim --out records one per run).</p>{{end}}
<h2>Scenario</h2>
<pre id="scenario">{{.ScenarioJSON}}</pre>
</body>
</html>
`))
