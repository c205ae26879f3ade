package sim

import "errors"

// SetTraceReading changes how the scenario's own trace (Trace, as its file
// names it) is read: its format, the scale of a counts trace and the
// offset, which replace the trace_format, trace_scale and trace_offset
// fields (zero values take the defaults). The trace loaded is dropped: the
// next Prepare reads it again, and a scenario that lasted its trace's span
// lasts the new span. It returns an error when the scenario has no trace.
// (The CLI's --trace-format, --trace-scale and --trace-offset were ignored
// with a scenario naming its own trace.)
func (s *Scenario) SetTraceReading(format string, scale float64, offset Duration) error {
	if s.Trace == "" {
		return errors.New("sim: the scenario has no trace")
	}
	s.TraceFormat, s.TraceScale, s.TraceOffset = format, scale, offset
	s.trace, s.counts = nil, nil
	if s.spanned {
		s.Duration, s.spanned = 0, false
	}
	return nil
}
