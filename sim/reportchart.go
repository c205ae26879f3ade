package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The charts of report.html (reporthtml.go) are inline SVG laid out here:
// a scale maps values to pixels, clipping values beyond its range to its
// edge (the point is then marked, with its true value in its title), and
// every series gets a colour no other series of the page has.

// Chart geometry, in pixels: the SVG is chartW x chartH, the plot area
// inside the margins (the right one holds the legend).
const (
	chartW, chartH                 = 640, 300
	chartL, chartR, chartT, chartB = 60, 160, 20, 40
)

// scale maps values in [lo, hi] (log: log10 between them, values <= 0 at
// lo) to pixels from p0 to p1.
type scale struct {
	lo, hi float64
	log    bool
	p0, p1 float64
}

// at returns the pixel of v and whether v was clipped to the scale's
// range (-1 below lo, +1 above hi; a zero on a log scale sits at lo
// unclipped).
func (s scale) at(v float64) (float64, int) {
	clip := 0
	switch {
	case v > s.hi:
		v, clip = s.hi, 1
	case s.log && v <= 0:
		v = s.lo
	case v < s.lo:
		v, clip = s.lo, -1
	}
	var f float64
	if s.log {
		f = (math.Log10(v) - math.Log10(s.lo)) / (math.Log10(s.hi) - math.Log10(s.lo))
	} else {
		f = (v - s.lo) / (s.hi - s.lo)
	}
	return s.p0 + f*(s.p1-s.p0), clip
}

// ticks returns the scale's tick marks (tickValues).
func (s scale) ticks() []htmlTick {
	var ts []htmlTick
	for _, v := range s.tickValues() {
		p, _ := s.at(v)
		ts = append(ts, htmlTick{Pos: p, Label: tickLabel(v)})
	}
	return ts
}

// tickValues returns where the scale's ticks go: about five multiples of
// a round step (niceStep), or the decades of a log scale.
func (s scale) tickValues() []float64 {
	var vs []float64
	if s.log {
		for d := math.Floor(math.Log10(s.lo)); d <= math.Ceil(math.Log10(s.hi)); d++ {
			if v := math.Pow(10, d); v >= s.lo*0.999 && v <= s.hi*1.001 {
				vs = append(vs, v)
			}
		}
		return vs
	}
	step := niceStep((s.hi - s.lo) / 4)
	for i := math.Ceil(s.lo / step); i*step <= s.hi+step*1e-9; i++ {
		vs = append(vs, i*step)
	}
	return vs
}

// niceStep returns the smallest of 1, 2, 2.5 and 5 times a power of ten
// that is at least raw (> 0).
func niceStep(raw float64) float64 {
	if !(raw > 0) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// outlierFactor: a value of an interval-free strategy more than this many
// times the largest value of the swept strategies is off the chart (drawn
// clipped), so local-only's thousands of percent do not flatten the
// curves the sync interval is tuned with.
const outlierFactor = 3

// linearRange returns the range [lo, hi] of a linear axis over the values
// of the swept strategies (core) and of the others (extra): extra values
// beyond outlierFactor times the largest core value are left out (they
// are clipped), and hi has 10% headroom. fromZero starts the range at 0,
// else at the smallest value shown rounded down to a multiple of 10.
func linearRange(core, extra []float64, fromZero bool) (lo, hi float64) {
	cmax := math.Inf(-1)
	for _, v := range core {
		if finite(v) {
			cmax = math.Max(cmax, v)
		}
	}
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range core {
		if finite(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	for _, v := range extra {
		if finite(v) && (math.IsInf(cmax, -1) || v <= outlierFactor*cmax) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(hi, -1) { // nothing shown: every value is an outlier over a core of zeros
		lo, hi = 0, 0
	}
	if fromZero {
		lo = 0
	} else {
		lo = math.Floor(lo/10) * 10
	}
	if hi <= lo {
		hi = lo + 1
	} else {
		hi += (hi - lo) * 0.1
	}
	return lo, hi
}

// logRange returns the decades a log axis spans over the positive values
// of vs (one decade from 1 when there are none).
func logRange(vs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), 0
	for _, v := range vs {
		if finite(v) && v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi == 0 {
		return 1, 10
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return lo, hi
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// tickLabel formats an axis value: whole numbers without exponent, three
// significant digits below 100.
func tickLabel(v float64) string {
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// clipMark returns the marker of a point clipped at (x, y): a triangle
// pointing the way the value lies off the chart (up when clipY > 0, right
// when clipX > 0, down or left when below).
func clipMark(x, y float64, clipX, clipY int, label string) htmlMark {
	var d string
	switch {
	case clipY > 0:
		d = fmt.Sprintf("M%.1f,%.1f l-6,10 h12 z", x, y-2)
	case clipY < 0:
		d = fmt.Sprintf("M%.1f,%.1f l-6,-10 h12 z", x, y+2)
	case clipX > 0:
		d = fmt.Sprintf("M%.1f,%.1f l-10,-6 v12 z", x+2, y)
	default:
		d = fmt.Sprintf("M%.1f,%.1f l10,-6 v12 z", x-2, y)
	}
	return htmlMark{X: x, Y: y, Path: d, Label: label}
}

// spareColors serve strategies without a colour of their own, or whose
// colour another series already has.
var spareColors = []string{"#8c564b", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d"}

// seriesColors gives each of names (in order) a colour no other of them
// has: its strategy's own when free, else a spare one, else one of evenly
// spaced hues.
func seriesColors(names []string) map[string]string {
	out := map[string]string{}
	used := map[string]bool{}
	spare := 0
	for i, n := range names {
		if _, ok := out[n]; ok {
			continue
		}
		c := strategyColors[n]
		for c == "" || used[c] {
			if spare < len(spareColors) {
				c = spareColors[spare]
				spare++
			} else {
				c = fmt.Sprintf("hsl(%d,70%%,40%%)", (i*137)%360)
				if used[c] {
					c = fmt.Sprintf("hsl(%d,60%%,55%%)", (i*137+60)%360)
				}
			}
		}
		out[n], used[c] = c, true
	}
	return out
}

// seriesWidth is the stroke width of series i of n: the first drawn is the
// widest, so a later series over the same points leaves it visible as a
// border (strict under auto at 0% overrun).
func seriesWidth(i, n int) float64 {
	if n <= 1 {
		return 2
	}
	return math.Round(20+40*float64(n-1-i)/float64(n-1)) / 10
}

// joinPoints formats polyline points.
func joinPoints(xs, ys []float64) string {
	var b strings.Builder
	for i := range xs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", xs[i], ys[i])
	}
	return b.String()
}
