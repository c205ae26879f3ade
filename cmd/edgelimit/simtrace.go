package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/edgelimit/edgelimit/sim"
)

// traceFlagsNote ends the help of --trace-format, --trace-scale and
// --trace-offset.
const traceFlagsNote = "; without --trace, applies to the --scenario's own trace, over its trace_* fields (refused when it has none)"

// applyTraceFlags applies --trace-format, --trace-scale and --trace-offset
// (format, scale, offset) to the scenario's own trace when no --trace is
// given: each flag given replaces the scenario's trace_* field, the others
// stay as the scenario sets them. Given for a scenario without a trace,
// they are refused (they were ignored without a word).
func applyTraceFlags(fs *flag.FlagSet, sc *sim.Scenario, format string, scale float64, offset sim.Duration) error {
	var given []string
	f, sl, o := sc.TraceFormat, sc.TraceScale, sc.TraceOffset
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "trace-format":
			f = format
		case "trace-scale":
			sl = scale
		case "trace-offset":
			o = offset
		default:
			return
		}
		given = append(given, "--"+fl.Name)
	})
	if len(given) == 0 {
		return nil
	}
	if sc.Trace == "" {
		return fmt.Errorf("sim: %s: the scenario %s has no trace to apply %s to (give --trace, or a scenario that names one)",
			strings.Join(given, ", "), sc.Name, map[bool]string{true: "them", false: "it"}[len(given) > 1])
	}
	if err := sc.SetTraceReading(f, sl, o); err != nil {
		return fmt.Errorf("sim: %s: %w", strings.Join(given, ", "), err)
	}
	return nil
}
