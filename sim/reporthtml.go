package sim

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"time"
)

// WriteHTML writes rep as one self-contained page (report.html): the
// scenario, the results table, and charts of worst-window overrun,
// utilisation and sync cost against the sync interval per strategy, as
// inline SVG, readable offline.
func WriteHTML(w io.Writer, rep Report) error {
	var chart bytes.Buffer
	title := "edgelimit sim: " + rep.Scenario.Name
	if err := writeChart(&chart, title, rep.Results, []chartPanel{
		{"worst key-window overrun, % of limit", func(r Result) float64 { return r.WorstOverrunPct }, false},
		{"utilisation, %", func(r Result) float64 { return r.Utilisation }, false},
		{"sync requests per decision, %", func(r Result) float64 { return r.SyncPerDecision }, false},
	}); err != nil {
		return err
	}
	type row struct {
		Result
		Sync, P50, P99 string
	}
	var rows []row
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if r.Strategy == LocalOnly || r.Strategy == Central {
			if seen[r.Strategy] {
				continue // the same at every interval
			}
			seen[r.Strategy] = true
		}
		rows = append(rows, row{Result: r, Sync: syncLabel(r), P50: fmtDur(int64(r.LatencyP50)), P99: fmtDur(int64(r.LatencyP99))})
	}
	data := struct {
		Title, Description, Legend string
		Scenario                   *Scenario
		Duration                   string
		Rows                       []row
		Chart                      template.HTML
		Tuning                     *Tuning
	}{title, rep.Scenario.Description, Legend, rep.Scenario, time.Duration(rep.Scenario.Duration).String(), rows,
		template.HTML(chart.String()), rep.Tuning}
	if err := reportPage.Execute(w, data); err != nil {
		return fmt.Errorf("sim: html: %w", err)
	}
	return nil
}

var reportPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct": func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"dur": func(d Duration) string { return time.Duration(d).String() },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { padding: .25em .6em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
pre { color: #555; }
</style></head><body>
<h1>{{.Title}}</h1>
<p>{{.Description}}</p>
<p>{{.Scenario.Isolates}} isolates in {{.Scenario.Locations}} locations, {{.Duration}} simulated.</p>
<div>{{.Chart}}</div>
<table id="results"><thead><tr><th>strategy</th><th>sync</th><th>admitted</th><th>worst win %</th><th>p99 win %</th>
<th>wins over %</th><th>unserved %</th><th>util %</th><th>sync/dec %</th><th>KB/s</th><th>wait p50</th><th>wait p99</th></tr></thead><tbody>
{{range .Rows}}<tr><td>{{.Strategy}}</td><td>{{.Sync}}</td><td>{{.Admitted}}</td><td>{{pct .WorstOverrunPct}}</td><td>{{pct .P99OverrunPct}}</td>
<td>{{pct .OverWindowsPct}}</td><td>{{pct .UnservedPct}}</td><td>{{pct .Utilisation}}</td><td>{{pct .SyncPerDecision}}</td>
<td>{{printf "%.1f" .SyncBytesPerSec}}</td><td>{{.P50}}</td><td>{{.P99}}</td></tr>
{{end}}</tbody></table>
{{with .Tuning}}<h2>Tuning {{.Strategy}}: {{.Metric}} key-window &lt;= {{.Target}}% on seeds {{.Seeds}}</h2>
<table id="tuning"><thead><tr><th>interval</th><th>{{.Metric}} win %</th><th>meets</th></tr></thead><tbody>
{{range .Curve}}<tr><td>{{dur .Interval}}</td><td>{{pct .Metric}}</td><td>{{.Meets}}</td></tr>
{{end}}</tbody></table>
<p>{{if .Found}}Pick: sync every {{dur .Interval}}.{{else}}No interval in the scan meets the target.{{end}}</p>{{end}}
<pre>{{.Legend}}</pre>
</body></html>
`))
