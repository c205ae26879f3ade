package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// A trace is a recorded list of requests to replay, in one of two formats.
//
// CSV, one request per line: timestamp,target,limiter,key,cost
//
//	# t (s),target,limiter,key,cost
//	0.000,iso:3,llm,org-1,1
//	0.125,loc:1,llm,org-2,1
//	0.250,,llm,org-1,2
//
// JSON lines, one object per line:
//
//	{"t": 0.125, "location": 1, "limiter": "llm", "key": "org-2", "cost": 1}
//	{"t": 0.25, "isolate": 3, "limiter": "llm", "key": "org-1"}
//
// timestamp (t) is seconds since the start of the simulation (a decimal
// number, >= 0), or Unix time in seconds as logs record it (a trace whose
// first request is after 1e7 s is shifted so that it starts at 0; up to
// 1e10, to about a microsecond). target is "iso:N" (isolate N, modulo the scenario's
// isolates), "loc:N" (a random isolate of location N, modulo the
// locations) or empty (a random isolate); in JSON, "isolate" or "location".
// cost defaults to 1. Blank lines and lines starting with '#' are skipped,
// and so is a first CSV line whose timestamp is not a number (a header).
// Lines need not be sorted; the replay sorts them by time (stable).
// Requests after the scenario's duration are not replayed.

type traceEvent struct {
	t        int64 // ns
	isolate  int   // -1 when not given
	location int   // -1 when not given
	limiter  string
	key      string
	cost     int64
}

type traceJSON struct {
	T        *float64 `json:"t"`
	Isolate  *int     `json:"isolate"`
	Location *int     `json:"location"`
	Limiter  string   `json:"limiter"`
	Key      string   `json:"key"`
	Cost     *int64   `json:"cost"`
}

// ParseTrace parses a trace (see the format above); jsonLines selects JSON
// lines rather than CSV.
func ParseTrace(data []byte, jsonLines bool) ([]traceEvent, error) {
	var out []traceEvent
	// Limiter names and keys repeat; one copy of each keeps a long
	// trace's memory near its count of requests rather than its bytes.
	names := map[string]string{}
	intern := func(s string) string {
		if c, ok := names[s]; ok {
			return c
		}
		s = strings.Clone(s)
		names[s] = s
		return s
	}
	first := true
	err := eachDataLine(data, func(line int, text string) (bool, error) {
		isFirst := first
		first = false
		ev := traceEvent{isolate: -1, location: -1, cost: 1}
		var secs float64
		if jsonLines {
			var j traceJSON
			dec := json.NewDecoder(strings.NewReader(text))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&j); err != nil {
				return false, fmt.Errorf("sim: trace line %d: %w", line, err)
			}
			if j.T == nil {
				return false, fmt.Errorf("sim: trace line %d: no timestamp (\"t\")", line)
			}
			secs, ev.limiter, ev.key = *j.T, j.Limiter, j.Key
			for _, n := range []*int{j.Isolate, j.Location} {
				if n != nil && *n < 0 {
					return false, fmt.Errorf("sim: trace line %d: isolate and location must be >= 0, got %d", line, *n)
				}
			}
			if j.Isolate != nil {
				ev.isolate = *j.Isolate
			}
			if j.Location != nil {
				ev.location = *j.Location
			}
			if j.Cost != nil {
				ev.cost = *j.Cost // 0 is refused below, as in CSV
			}
		} else {
			f := strings.Split(text, ",")
			if len(f) < 4 || len(f) > 5 {
				return false, fmt.Errorf("sim: trace line %d: want timestamp,target,limiter,key[,cost], got %d fields", line, len(f))
			}
			var err error
			secs, err = strconv.ParseFloat(strings.TrimSpace(f[0]), 64)
			if err != nil {
				if isFirst {
					return true, nil // a header
				}
				return false, fmt.Errorf("sim: trace line %d: timestamp: %w", line, err)
			}
			if tg := strings.TrimSpace(f[1]); tg != "" {
				kind, num, ok := strings.Cut(tg, ":")
				n, err := strconv.Atoi(num)
				if !ok || err != nil || n < 0 || (kind != "iso" && kind != "loc") {
					return false, fmt.Errorf("sim: trace line %d: target %q: want iso:N, loc:N or empty", line, tg)
				}
				if kind == "iso" {
					ev.isolate = n
				} else {
					ev.location = n
				}
			}
			ev.limiter, ev.key = strings.TrimSpace(f[2]), strings.TrimSpace(f[3])
			if len(f) == 5 && strings.TrimSpace(f[4]) != "" {
				if ev.cost, err = strconv.ParseInt(strings.TrimSpace(f[4]), 10, 64); err != nil {
					return false, fmt.Errorf("sim: trace line %d: cost: %w", line, err)
				}
			}
		}
		if !(secs >= 0) || secs > 1e10 {
			return false, fmt.Errorf("sim: trace line %d: timestamp must be between 0 and 1e10 seconds", line)
		}
		ev.t = int64(math.Round(secs * 1e9))
		switch {
		case ev.key == "" || len(ev.key) > wire.MaxKeyLen:
			return false, fmt.Errorf("sim: trace line %d: key must be 1 to %d bytes", line, wire.MaxKeyLen)
		case ev.limiter == "":
			return false, fmt.Errorf("sim: trace line %d: limiter missing", line)
		case ev.cost < 1 || ev.cost > wire.MaxCost:
			return false, fmt.Errorf("sim: trace line %d: cost must be between 1 and 2^40", line)
		case ev.isolate >= 0 && ev.location >= 0:
			return false, fmt.Errorf("sim: trace line %d: give an isolate or a location, not both", line)
		}
		ev.limiter, ev.key = intern(ev.limiter), intern(ev.key)
		out = append(out, ev)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("sim: trace: no requests")
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].t < out[j].t })
	if first := out[0].t; first > epochAfter {
		for i := range out { // Unix times: the trace starts at 0
			out[i].t -= first
		}
	}
	if span := out[len(out)-1].t - out[0].t; span > maxTraceSpan {
		// (A timestamp of 0 among Unix times made a 54-year run.)
		return nil, fmt.Errorf("sim: trace: its requests span %v, more than %v: a timestamp of 0 among Unix times?",
			time.Duration(span).Round(time.Hour), time.Duration(maxTraceSpan))
	}
	return out, nil
}

// maxTraceSpan is the longest a trace may last: 366 days.
const maxTraceSpan = int64(366 * 24 * time.Hour)

// epochAfter is the time (ns) after which a trace's first request marks
// its timestamps as Unix times (1e7 s: 116 days).
const epochAfter = int64(1e7 * 1e9)
