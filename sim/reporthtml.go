package sim

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// WriteHTML writes rep as one self-contained HTML page (report.html of
// `edgelimit sim --out`), readable offline: the scenario, the results table
// and three inline SVG charts against the sync interval (log scale), one
// line per strategy: worst-window overrun (% of the limit), utilisation (%)
// and sync requests per second. Strategies without a sync interval
// (local-only, central) are drawn as dashed horizontal lines.
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
	for _, r := range rep.Results {
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
	page.Charts = []htmlChart{
		chartOf("worst-window overrun (% of the limit)", "overrun", rep.Results,
			func(r Result) float64 { return r.WorstOverrunPct }),
		chartOf("utilisation (% of what the limit allows)", "utilisation", rep.Results,
			func(r Result) float64 { return r.Utilisation }),
		chartOf("sync requests per second (log scale)", "sync", rep.Results,
			func(r Result) float64 { return r.SyncPerSec }),
	}
	if err := htmlTmpl.Execute(w, page); err != nil {
		return fmt.Errorf("sim: html: %w", err)
	}
	return nil
}

func pct(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "%" }

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
	Charts                           []htmlChart
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
	Title, ID string
	W, H      int
	Lines     []htmlLine
	XTicks    []htmlTick
	YTicks    []htmlTick
	Empty     bool
}

type htmlLine struct {
	Strategy, Color, Points string
	Dashed                  bool
	Dots                    []htmlDot
}

type htmlDot struct {
	X, Y  float64
	Label string
}

type htmlTick struct {
	Pos   float64
	Label string
}

const (
	chartW, chartH                 = 640, 300
	chartL, chartR, chartT, chartB = 60, 150, 20, 40
)

// chartOf lays out one panel: x is the sync interval (log scale), y linear
// from 0 to the largest value, or for the sync panel (id "sync") log scale
// over the decades the positive values span, zeros on the axis.
func chartOf(title, id string, rs []Result, y func(Result) float64) htmlChart {
	logY := id == "sync"
	ch := htmlChart{Title: title, ID: id, W: chartW, H: chartH}
	byStrategy := map[string][]Result{}
	var order []string
	xmin, xmax, ymax, ypos := math.Inf(1), math.Inf(-1), 0.0, math.Inf(1)
	for _, r := range rs {
		if _, ok := byStrategy[r.Strategy]; !ok {
			order = append(order, r.Strategy)
		}
		byStrategy[r.Strategy] = append(byStrategy[r.Strategy], r)
		if swept(r) {
			xmin, xmax = math.Min(xmin, float64(r.Sync)), math.Max(xmax, float64(r.Sync))
		}
		if v := y(r); !math.IsNaN(v) && !math.IsInf(v, 0) {
			ymax = math.Max(ymax, v)
			if v > 0 {
				ypos = math.Min(ypos, v)
			}
		}
	}
	if len(rs) == 0 {
		ch.Empty = true
		return ch
	}
	if math.IsInf(xmin, 1) { // no swept strategy: one arbitrary decade
		xmin, xmax = float64(100*time.Millisecond), float64(time.Second)
	}
	if xmax <= xmin {
		xmin, xmax = xmin/2, xmax*2
	}
	if ymax <= 0 {
		ymax = 1
	}
	ymax *= 1.1
	lx0, lx1 := math.Log(xmin), math.Log(xmax)
	px := func(x float64) float64 {
		return chartL + (math.Log(x)-lx0)/(lx1-lx0)*float64(chartW-chartL-chartR)
	}
	py := func(v float64) float64 { return float64(chartH-chartB) - v/ymax*float64(chartH-chartT-chartB) }
	logY = logY && !math.IsInf(ypos, 1) // all zero: linear
	if logY {
		d0, d1 := math.Floor(math.Log10(ypos)), math.Ceil(math.Log10(ymax/1.1))
		if d1 <= d0 {
			d1 = d0 + 1
		}
		py = func(v float64) float64 {
			if v <= 0 {
				return float64(chartH - chartB)
			}
			f := (math.Log10(v) - d0) / (d1 - d0)
			return float64(chartH-chartB) - math.Max(f, 0)*float64(chartH-chartT-chartB)
		}
		for d := d0; d <= d1; d++ {
			ch.YTicks = append(ch.YTicks, htmlTick{Pos: py(math.Pow(10, d)), Label: tickLabel(math.Pow(10, d))})
		}
	}
	for _, r := range rs {
		if swept(r) && !hasTick(ch.XTicks, px(float64(r.Sync))) {
			ch.XTicks = append(ch.XTicks, htmlTick{Pos: px(float64(r.Sync)), Label: time.Duration(r.Sync).String()})
		}
	}
	for i := 0; i <= 4 && !logY; i++ {
		v := ymax / 1.1 * float64(i) / 4
		ch.YTicks = append(ch.YTicks, htmlTick{Pos: py(v), Label: tickLabel(v)})
	}
	for _, s := range order {
		rr := byStrategy[s]
		color := strategyColors[s]
		if color == "" {
			color = "#444"
		}
		ln := htmlLine{Strategy: s, Color: color}
		var pts []string
		if !swept(rr[0]) {
			v := y(rr[0])
			ln.Dashed = true
			pts = []string{fmt.Sprintf("%.1f,%.1f", px(xmin), py(v)), fmt.Sprintf("%.1f,%.1f", px(xmax), py(v))}
			ln.Dots = []htmlDot{{X: px(xmax), Y: py(v), Label: fmt.Sprintf("%s: %.3g", s, v)}}
		} else {
			sort.SliceStable(rr, func(i, j int) bool { return rr[i].Sync < rr[j].Sync })
			for _, r := range rr {
				x, v := px(float64(r.Sync)), py(y(r))
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, v))
				ln.Dots = append(ln.Dots, htmlDot{X: x, Y: v,
					Label: fmt.Sprintf("%s at %s: %.3g", s, time.Duration(r.Sync), y(r))})
			}
		}
		ln.Points = strings.Join(pts, " ")
		ch.Lines = append(ch.Lines, ln)
	}
	return ch
}

// tickLabel formats an axis value: whole numbers without exponent, three
// significant digits below 100.
func tickLabel(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
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
	"plotR":   func() int { return chartW - chartR },
	"legendX": func() int { return chartW - chartR + 10 },
	"plotB":   func() int { return chartH - chartB },
	"plotL":   func() int { return chartL },
	"plotT":   func() int { return chartT },
}).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1100px; }
table { border-collapse: collapse; margin: .8em 0; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
pre { background: #f6f6f6; padding: .8em; overflow: auto; max-height: 24em; }
figure { margin: 1em 0; }
svg text { font: 11px system-ui, sans-serif; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{with .Description}}<p>{{.}}</p>{{end}}
<h2>Results</h2>
<table id="results">
<thead><tr><th>strategy</th><th>sync</th><th>requests</th><th>admitted</th><th>denied</th><th>overrun</th><th>worst window</th><th>utilisation</th><th>unserved with room</th><th>stranded in leases</th><th>syncs/s</th><th>syncs per decision</th><th>waited</th><th>wait p50</th><th>wait p99</th></tr></thead>
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
{{range .Charts}}<figure id="chart-{{.ID}}">
<figcaption>{{.Title}}</figcaption>
{{if .Empty}}<p>no results</p>{{else}}<svg xmlns="http://www.w3.org/2000/svg" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-label="{{.Title}}">
<line x1="{{plotL}}" y1="{{plotB}}" x2="{{plotR}}" y2="{{plotB}}" stroke="#333"/>
<line x1="{{plotL}}" y1="{{plotT}}" x2="{{plotL}}" y2="{{plotB}}" stroke="#333"/>
{{range .YTicks}}<line x1="{{plotL}}" y1="{{.Pos}}" x2="{{plotR}}" y2="{{.Pos}}" stroke="#eee"/><text x="{{plotL}}" y="{{.Pos}}" text-anchor="end" dx="-4" dy="4">{{.Label}}</text>
{{end}}{{range .XTicks}}<text x="{{.Pos}}" y="{{plotB}}" dy="16" text-anchor="middle">{{.Label}}</text>
{{end}}{{range $i, $l := .Lines}}<polyline class="series" data-strategy="{{$l.Strategy}}" points="{{$l.Points}}" fill="none" stroke="{{$l.Color}}" stroke-width="2"{{if $l.Dashed}} stroke-dasharray="6 4"{{end}}/>
{{range $l.Dots}}<circle cx="{{.X}}" cy="{{.Y}}" r="3" fill="{{$l.Color}}"><title>{{.Label}}</title></circle>
{{end}}<rect x="{{legendX}}" y="{{legendY $i}}" width="12" height="3" fill="{{$l.Color}}" transform="translate(0,-4)"/><text x="{{legendX}}" y="{{legendY $i}}" dx="18">{{$l.Strategy}}</text>
{{end}}</svg>{{end}}
</figure>
{{end}}
<h2>Scenario</h2>
<pre id="scenario">{{.ScenarioJSON}}</pre>
</body>
</html>
`))
