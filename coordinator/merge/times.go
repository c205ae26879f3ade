package merge

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Times in a batch are the isolate's, bounded against the coordinator's
// clock so that no batch can move a key into a window that honest isolates
// reach only later (which would drop their deltas of the window before as
// stale, and let them admit a window's worth again). An isolate's clock
// may run at most MergerOptions.MaxClockSkew ahead:
//
//   - the batch time At must be <= now + skew (field "at");
//   - a windowed entry's (or ask's, or final denial's) window must be the
//     coordinator's current window
//     (now/period) or an earlier one, or the next one when it starts
//     within the skew, that is <= min(now/period + 1, (now + skew)/period)
//     (field "e[i].window"). A key's newest window is then at most one
//     ahead of the coordinator's, so the current window's deltas of
//     honest isolates are always kept (as the key's previous window at
//     worst).
//
// Both are answered 400 with the problem type urn:edgelimit:problem:clock_skew
// and nothing of the batch is applied. Past windows are not refused: an
// entry older than the key's newest window - 1 is dropped, counted in
// MergeStats.DeltasStale (metric deltas_stale_total) and reported to the
// client in the reply header Edgelimit-Stale-Entries.

// DefaultMaxClockSkew is the default MergerOptions.MaxClockSkew: 2 s,
// well above what NTP keeps clocks to, and small enough that a window
// ahead is refused unless it starts within 2 s.
const DefaultMaxClockSkew = 2 * time.Second

// ErrClockSkew marks a batch refused for a time or window too far ahead of
// the coordinator's clock (the error wraps a *wire.FieldError naming the
// field, whose Err wraps ErrClockSkew).
var ErrClockSkew = errors.New("ahead of the coordinator's clock")

// checkTimes refuses a batch whose time or windows run ahead of now (ns) by
// more than the allowed skew.
func (m *Merger) checkTimes(b *wire.Batch, now int64) error {
	horizon := addSat(now, int64(m.opts.MaxClockSkew))
	if b.At > horizon {
		return fmt.Errorf("merge: %w", &wire.FieldError{Field: "at", Err: skewError("batch time "+strconv.FormatInt(b.At, 10)+" ns",
			strconv.FormatInt(horizon, 10)+" ns")})
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		if err := m.checkWindow("e", i, e.Limiter, e.Window, now, horizon); err != nil {
			return err
		}
	}
	for _, kc := range [...]struct {
		f  string
		cs []wire.KeyCost
	}{{"ak", b.Asks}, {"dn", b.Denials}} {
		for i := range kc.cs {
			if err := m.checkWindow(kc.f, i, kc.cs[i].Limiter, kc.cs[i].Window, now, horizon); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkWindow refuses window of item i of the batch's field f (an entry,
// ask or denial of limiter) past the newest window a batch may name at now
// (ns; horizon is now plus the allowed skew). Buckets have no windows.
func (m *Merger) checkWindow(f string, i int, limiter string, window, now, horizon int64) error {
	lim := m.lims[limiter]
	if lim.IsBucket() {
		return nil
	}
	if maxWin := maxWindow(now, horizon, lim.Period); window > maxWin {
		return fmt.Errorf("merge: %w", &wire.FieldError{Field: f + "[" + strconv.Itoa(i) + "].window",
			Err: skewError("window "+strconv.FormatInt(window, 10), "window "+strconv.FormatInt(maxWin, 10))})
	}
	return nil
}

func skewError(got, limit string) error {
	return fmt.Errorf("%w: %s is past %s (the coordinator's clock plus the allowed skew; is the isolate's clock right?)",
		ErrClockSkew, got, limit)
}

// maxWindow is the newest window of period (ns) a batch may name at now
// (ns): the current one, or the next one when it starts by horizon (now
// plus the allowed skew).
func maxWindow(now, horizon, period int64) int64 {
	return min(limitmath.Window(now, period)+1, limitmath.Window(horizon, period))
}
