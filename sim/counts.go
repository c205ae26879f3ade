package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// A counts trace is how production request rates are usually published:
// the number of requests in each bin of time (one second unless the
// scenario says otherwise), as numbers separated by whitespace or one per
// line:
//
//	# requests per second of a web service
//	412 398 455
//	1203
//	388
//
// Lines starting with '#' are skipped. The scenario's trace_scale
// multiplies every count (fractions are rounded at random, seeded),
// trace_offset skips the start of the trace, and trace_limiter /
// trace_keys say which limiter and keys its requests ask; each request
// goes to a random isolate, at a uniformly random time within its bin.

// parseCounts reads a counts trace. Errors name the line. A file whose
// every line holds two numbers is refused: it reads as a table of (time,
// count), whose times would be replayed as counts of alternate bins (a
// counts trace holds no timestamps; a recorded list of requests is the
// requests format, ParseTrace). A count above 1e9 may be a Unix time, and
// the error says so.
func parseCounts(data []byte) ([]float64, error) {
	var out []float64
	lines, pairs, firstPair := 0, 0, 0
	err := eachDataLine(data, func(line int, text string) (bool, error) {
		fields := strings.Fields(text)
		for _, f := range fields {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil || !(v >= 0) || v > 1e9 {
				err := fmt.Errorf("sim: trace line %d: want request counts (numbers in [0, 1e9]), got %q", line, f)
				if v > 1e9 {
					err = fmt.Errorf("%w: a Unix timestamp? %s", err, noTimestamps)
				}
				return false, err
			}
			out = append(out, v)
		}
		lines++
		if len(fields) == 2 {
			if pairs++; pairs == 1 {
				firstPair = line
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sim: trace: no counts")
	}
	if lines >= 2 && pairs == lines {
		return nil, fmt.Errorf("sim: trace line %d: every line holds two numbers, as a table of (time, count) does: %s; "+
			"for such a table keep the count column alone", firstPair, noTimestamps)
	}
	return out, nil
}

// noTimestamps says what a counts trace holds instead of timestamps.
const noTimestamps = "a counts trace holds request counts only, one per bin in order (one per line, or several separated " +
	"by spaces), no timestamps; for timestamped requests use the requests format (CSV: timestamp,target,limiter,key[,cost]; " +
	"trace_format \"requests\")"

// Trace formats (Scenario.TraceFormat).
const (
	TraceRequests   = "requests" // one request per line, CSV (see ParseTrace)
	TraceJSONLines  = "jsonl"    // one request per line, JSON (see ParseTrace)
	TraceCounts     = "counts"   // requests per bin (see parseCounts)
	traceFormatAuto = ""         // from the content
)

// detectTraceFormat guesses a trace's format from its first line that is
// neither blank nor a comment: '{' starts JSON lines, a line of numbers
// separated by whitespace is a counts trace, anything else is CSV.
func detectTraceFormat(data []byte) string {
	format := TraceRequests
	eachDataLine(data, func(_ int, t string) (bool, error) {
		if t[0] == '{' {
			format = TraceJSONLines
			return false, nil
		}
		for _, f := range strings.Fields(t) {
			if _, err := strconv.ParseFloat(f, 64); err != nil {
				return false, nil
			}
		}
		format = TraceCounts
		return false, nil
	})
	return format
}

// countsSource generates the requests of a counts trace, bin by bin.
type countsSource struct {
	counts []float64 // after the offset
	bin    int64     // ns
	scale  float64
	bi     int     // next bin to generate
	times  []int64 // requests of the current bin not yet replayed, ascending

	// A bin of more than bigBin requests is generated in order, bigBin at a
	// time (a count of 1e9 held 8 GB of times): pending are its requests
	// not generated yet, after the last at (ns), before binEnd.
	pending    int
	at, binEnd float64
}

// bigBin is the most requests of one bin generated at once.
const bigBin = 1 << 16

// fill generates the requests of the next non-empty bin (or the next
// part of a big one) into c.times and returns false when the trace is
// over.
func (c *countsSource) fill(rng *rand.Rand) bool {
	for len(c.times) == 0 {
		if c.pending == 0 {
			if c.bi >= len(c.counts) {
				return false
			}
			x := c.counts[c.bi] * c.scale
			n := int(x)
			if rng.Float64() < x-math.Floor(x) {
				n++
			}
			start := int64(c.bi) * c.bin
			c.bi++
			if n > bigBin {
				c.pending, c.at, c.binEnd = n, float64(start), float64(start+c.bin)
				continue
			}
			c.times = c.times[:0]
			for range n {
				c.times = append(c.times, start+rng.Int64N(c.bin))
			}
			slices.Sort(c.times)
			continue
		}
		// The next of k uniform times after at, in order: the least of k
		// uniform draws in (at, binEnd) is at + (binEnd-at)(1-U^(1/k)).
		c.times = c.times[:0]
		for range min(c.pending, bigBin) {
			u := 1 - rng.Float64() // (0, 1]
			c.at += (c.binEnd - c.at) * (1 - math.Pow(u, 1/float64(c.pending)))
			c.pending--
			c.times = append(c.times, min(int64(c.at), int64(c.binEnd)-1))
		}
	}
	return true
}

// left returns the requests not replayed yet: those generated for the
// current bin, those of a big bin not generated yet and the (scaled)
// counts of the bins after it.
func (c *countsSource) left() int64 {
	var n float64
	for _, x := range c.counts[c.bi:] {
		n += x * c.scale
	}
	return int64(math.Round(n)) + int64(len(c.times)) + int64(c.pending)
}
