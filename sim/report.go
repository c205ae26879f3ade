package sim

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Legend defines the columns of WriteTable.
const Legend = `worst win %: overrun of the worst key-window (admitted beyond the limit in one window of one key),
  % of the limit (a sliding window: its weighted count, with the previous window's share); p99 win %: the 99th percentile key-window; wins over %: share of key-windows over the limit;
total over %: all overrun / all capacity (a total: it hides bad windows among good ones);
unserved %: demand left unserved while there was room, per key-window min(denied, bound - admitted), % of the bounds,
  a window's bound being what an exact limiter deciding its requests in order admits (min(offered, limit) for costs of 1;
  a bucket: what an exact bucket admitted in the window); util %: admitted / bound, summed over key-windows;
syncs/s, sync/dec %: sync requests (batches, retries; central: round trips) per second and per decision;
KB/s: sync bytes both ways; waited %: share of decisions that waited for the coordinator before their answer
  (a request held for a lease or read-through sync; every central round trip); wait p50/p99: how long a request
  waited, over all decisions (0 for one that did not wait; 12.5% buckets);
stranded %: budget stranded in leases, per key-window min(denied, reserved in leases at the window's end and
  never used: counted + reserved at the coordinator - admitted), at most the window's unserved, % of the bounds
  (part of unserved %).
`

// WriteTable prints results as an aligned text table.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tsync\tadmitted\tworst win %\tp99 win %\twins over %\ttotal over %\tunserved %\tutil %\tstranded %\tsyncs/s\tsync/dec %\tKB/s\twaited %\twait p50\twait p99\t")
	printed := map[string]bool{}
	for _, r := range rs {
		if r.Strategy == LocalOnly || r.Strategy == Central {
			if printed[r.Strategy] {
				continue // the same for every interval
			}
			printed[r.Strategy] = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%.2f\t%.0f\t%.2f\t%.1f\t%.1f\t%s\t%s\t\n",
			r.Strategy, syncLabel(r), r.Admitted, r.WorstOverrunPct, r.P99OverrunPct, r.OverWindowsPct, r.OverrunPct,
			r.UnservedPct, r.Utilisation, r.StrandedPct, r.SyncPerSec, r.SyncPerDecision, r.SyncBytesPerSec/1000,
			r.WaitedPct, fmtDur(int64(r.WaitP50)), fmtDur(int64(r.WaitP99)))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("sim: table: %w", err)
	}
	return writeUpstreamTable(w, rs)
}

// UpstreamLegend defines the columns of the upstream table WriteTable adds
// for scenarios with an upstream.
const UpstreamLegend = `upstream: what the API behind the limiter did with the admitted requests (its true limit, its own windows):
  ok and 429: its answers; util %: its 200s / min(offered, its limit), summed over its key-windows;
  429 windows: its key-windows with a 429; worst/iso: the most 429s one isolate got in one such window.
`

func writeUpstreamTable(w io.Writer, rs []Result) error {
	any := false
	for _, r := range rs {
		any = any || r.UpstreamAccepted+r.Upstream429+r.UpstreamFailed > 0
	}
	if !any {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\nstrategy\tsync\tupstream ok\t429\t503\tutil %\t429 windows\tworst/iso\t")
	printed := map[string]bool{}
	for _, r := range rs {
		if r.Strategy == LocalOnly || r.Strategy == Central {
			if printed[r.Strategy] {
				continue
			}
			printed[r.Strategy] = true
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.1f\t%d\t%d\t\n", r.Strategy, syncLabel(r), r.UpstreamAccepted,
			r.Upstream429, r.UpstreamFailed, r.UpstreamUtilisation, r.UpstreamPauseEvents, r.Upstream429WorstIsolate)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("sim: table: %w", err)
	}
	return nil
}

func syncLabel(r Result) string {
	switch r.Strategy {
	case LocalOnly:
		return "-"
	case Central:
		return "per req"
	}
	return time.Duration(r.Sync).String()
}

// Short formats d as the tables print waits: 0, or rounded to 10 µs
// ("41.94ms").
func (d Duration) Short() string { return fmtDur(int64(d)) }

func fmtDur(ns int64) string {
	if ns == 0 {
		return "0"
	}
	return time.Duration(ns).Round(10 * time.Microsecond).String()
}

var csvHeader = []string{"scenario", "strategy", "sync_interval_ms", "isolates", "duration_s", "seed",
	"requests", "admitted", "denied", "windows", "capacity", "overrun", "overrun_pct", "worst_overrun",
	"worst_overrun_pct", "p99_overrun_pct", "over_windows", "over_windows_pct", "unserved_with_room",
	"unserved_with_room_pct", "utilisation_pct", "stranded", "stranded_pct", "sync_requests",
	"sync_per_sec", "sync_per_decision_pct", "sync_bytes", "sync_bytes_per_sec", "sync_failures",
	"waited", "waited_pct", "waited_denied", "waited_denied_pct", "wait_p50_ms", "wait_p99_ms", "coordinator_writes", "coordinator_writes_per_sec", "evictions", "kills",
	"upstream_accepted", "upstream_429", "upstream_failed", "upstream_utilisation_pct", "upstream_pause_events",
	"upstream_429_worst_isolate", "remaining_err_pct", "remaining_high_p99_pct"}

// WriteCSV writes results as CSV with a header line.
func WriteCSV(w io.Writer, rs []Result) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	ms := func(d Duration) string { return f(float64(d) / 1e6) }
	for _, r := range rs {
		cw.Write([]string{r.Scenario, r.Strategy, ms(r.Sync), strconv.Itoa(r.Isolates), f(float64(r.Duration) / 1e9),
			strconv.FormatUint(r.Seed, 10), i(r.Requests), i(r.Admitted), i(r.Denied), i(r.Windows), i(r.Capacity),
			i(r.Overrun), f(r.OverrunPct), i(r.WorstOverrun), f(r.WorstOverrunPct), f(r.P99OverrunPct),
			i(r.OverWindows), f(r.OverWindowsPct), i(r.Unserved), f(r.UnservedPct), f(r.Utilisation),
			i(r.Stranded), f(r.StrandedPct), i(r.SyncRequests), f(r.SyncPerSec), f(r.SyncPerDecision),
			i(r.SyncBytes), f(r.SyncBytesPerSec), i(r.SyncFailures), i(r.Waited), f(r.WaitedPct), i(r.WaitedDenied), f(r.WaitedDeniedPct), ms(r.WaitP50), ms(r.WaitP99),
			i(r.CoordWrites), f(r.CoordWritesPerSec), i(r.Evictions), i(r.Kills),
			i(r.UpstreamAccepted), i(r.Upstream429), i(r.UpstreamFailed), f(r.UpstreamUtilisation), i(r.UpstreamPauseEvents),
			i(r.Upstream429WorstIsolate), f(r.RemainingErrPct), f(r.RemainingHighP99Pct)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("sim: csv: %w", err)
	}
	return nil
}

// Report is the JSON document WriteJSON writes.
type Report struct {
	Scenario *Scenario `json:"scenario"`
	Results  []Result  `json:"results"`
	Tuning   *Tuning   `json:"tuning,omitempty"`
	// TimelineOf chooses the run whose Timeline report.html draws:
	// "strategy@interval" (see TimelineChoice); "" the default.
	TimelineOf string `json:"-"`
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, rep Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("sim: json: %w", err)
	}
	return nil
}

// strategyColors is each strategy's colour in chart.svg and report.html
// (where seriesColors keeps them distinct).
var strategyColors = map[string]string{LocalOnly: "#d62728", Central: "#7f7f7f", Location: "#ff7f0e",
	Approximate: "#1f77b4", Strict: "#2ca02c", Auto: "#9467bd",
	Approximate + FeedbackSuffix: "#17becf", Strict + FeedbackSuffix: "#bcbd22", Auto + FeedbackSuffix: "#e377c2"}

// WriteSVG draws two panels against the sync interval (log scale), one
// line per strategy: worst-window overrun (% of the limit) and sync
// requests per second (log scale).
func WriteSVG(w io.Writer, title string, rs []Result) error {
	var ivs []float64
	seen := map[Duration]bool{}
	var order []string
	byStrat := map[string][]Result{}
	for _, r := range rs {
		if !seen[r.Sync] {
			seen[r.Sync] = true
			ivs = append(ivs, float64(r.Sync))
		}
		if byStrat[r.Strategy] == nil {
			order = append(order, r.Strategy)
		}
		byStrat[r.Strategy] = append(byStrat[r.Strategy], r)
	}
	if len(ivs) == 0 {
		return fmt.Errorf("sim: svg: no results")
	}
	minX, maxX := ivs[0], ivs[0]
	for _, v := range ivs {
		minX, maxX = math.Min(minX, v), math.Max(maxX, v)
	}
	if maxX <= minX {
		minX, maxX = minX/2, maxX*2
	}
	const W, H, pw, ph, left, top = 960, 420, 360, 280, 70, 50
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="22" font-size="15">%s</text>`+"\n", left, xmlEscape(title))
	xpos := func(px int, v float64) float64 {
		return float64(px) + pw*(math.Log(v)-math.Log(minX))/(math.Log(maxX)-math.Log(minX))
	}
	panel := func(px int, label string, val func(Result) float64, logY bool) {
		maxY, minY := 0.0, math.Inf(1)
		for _, r := range rs {
			v := val(r)
			maxY = math.Max(maxY, v)
			if v > 0 {
				minY = math.Min(minY, v)
			}
		}
		if maxY <= 0 {
			maxY = 1
		}
		if math.IsInf(minY, 1) || minY >= maxY {
			minY = maxY / 10
		}
		ypos := func(v float64) float64 {
			if logY {
				v = math.Max(v, minY)
				return top + ph - ph*(math.Log(v)-math.Log(minY))/(math.Log(maxY)-math.Log(minY))
			}
			return top + ph - ph*v/maxY
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", px, top, pw, ph)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", px, top-8, xmlEscape(label))
		for _, v := range ivs {
			x := xpos(px, v)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
				x, top, x, top+ph, x, top+ph+16, time.Duration(v))
		}
		for i := 0; i <= 4; i++ {
			var v float64
			if logY {
				v = math.Exp(math.Log(minY) + float64(i)/4*(math.Log(maxY)-math.Log(minY)))
			} else {
				v = maxY * float64(i) / 4
			}
			y := ypos(v)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
				px, y, px+pw, y, px-4, y+4, strconv.FormatFloat(v, 'g', 3, 64))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">sync interval</text>`+"\n", px+pw/2, top+ph+34)
		for _, st := range order {
			col := strategyColors[st]
			var pts []string
			for _, r := range byStrat[st] {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xpos(px, float64(r.Sync)), ypos(val(r))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
			for _, p := range pts {
				xy := strings.SplitN(p, ",", 2)
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], col)
			}
		}
	}
	panel(left, "worst-window overrun, % of limit", func(r Result) float64 { return r.WorstOverrunPct }, false)
	panel(left+pw+110, "sync requests / s (log)", func(r Result) float64 { return r.SyncPerSec }, true)
	for i, st := range order {
		x := left + i*150
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			x, H-22, strategyColors[st], x+20, H-17, xmlEscape(st))
	}
	b.WriteString("</svg>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("sim: svg: %w", err)
	}
	return nil
}

func xmlEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	return r.Replace(s)
}
