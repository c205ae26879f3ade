package sim

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// MaxTimelineWindows bounds a Timeline: at most this many windows are
// recorded (the first ones of the run, empty windows between them
// included), so a run's recording takes at most 32 KiB: 2048.
const MaxTimelineWindows = 2048

// Timeline is what one key admitted and was offered in each window of its
// limiter's period during a run (Result.Timeline; recorded when
// SweepOptions.Timeline is set), for report.html's timeline chart. The
// key is the run's first key (gid 0): the first traffic source's first
// key, its busiest under a zipf distribution. Window i of the slices is
// window index First+i; a window without traffic has 0.
type Timeline struct {
	Limiter string   `json:"limiter"`
	Key     string   `json:"key"`
	Period  Duration `json:"period"`
	// Limit is the key's capacity per window (the limit after overrides;
	// limit + burst for bucket algorithms), the line admitted is drawn
	// against.
	Limit    int64   `json:"limit"`
	First    int64   `json:"first_window"`
	Admitted []int64 `json:"admitted"`
	Offered  []int64 `json:"offered"`
	// Truncated: the run had more windows than MaxTimelineWindows; the
	// first ones are kept.
	Truncated bool `json:"truncated,omitempty"`
}

// timelineGid is the key a run records (see Timeline).
const timelineGid = 0

// startTimeline makes e record the timeline of its first key, if it has
// one.
func (e *engine) startTimeline() {
	if len(e.keys) <= timelineGid {
		return
	}
	k := &e.keys[timelineGid]
	e.res.Timeline = &Timeline{Limiter: e.cfg.Limiters[k.lim].Name, Key: k.name, Period: Duration(k.period),
		Limit: k.cap, First: -1}
}

// recordWindow adds the finished window tr of key gid to the timeline
// when gid is the recorded key.
func (e *engine) recordWindow(gid int32, tr *truth) {
	tl := e.res.Timeline
	if tl == nil || gid != timelineGid {
		return
	}
	if tl.First < 0 {
		tl.First = tr.win
	}
	i := tr.win - tl.First
	if i < int64(len(tl.Admitted)) { // windows are flushed in order; never happens
		return
	}
	if i >= MaxTimelineWindows {
		tl.Truncated = true
		return
	}
	for int64(len(tl.Admitted)) < i {
		tl.Admitted, tl.Offered = append(tl.Admitted, 0), append(tl.Offered, 0)
	}
	tl.Admitted, tl.Offered = append(tl.Admitted, tr.admitted), append(tl.Offered, tr.offered)
}

// TimelineChoice returns the result report.html draws the timeline of:
// the one of strategy@interval named by choice (ParseTimelineChoice; the
// interval is ignored for local-only and central) when it has a Timeline;
// with choice "", the tuner's pick when it ran, else auto, strict or the
// first swept strategy with a timeline, at the interval nearest 100 ms,
// else the first result with one. ok is false when none has one.
func TimelineChoice(rs []Result, choice string, t *Tuning) (Result, bool) {
	var with []Result
	for _, r := range rs {
		if r.Timeline != nil && len(r.Timeline.Admitted) > 0 {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return Result{}, false
	}
	find := func(strategy string, iv time.Duration) (Result, bool) {
		for _, r := range with {
			if r.Strategy == strategy && (!swept(r) || time.Duration(r.Sync) == iv) {
				return r, true
			}
		}
		return Result{}, false
	}
	if choice != "" {
		st, iv, err := ParseTimelineChoice(choice)
		if err != nil {
			return Result{}, false
		}
		return find(st, iv)
	}
	if t != nil && t.Found {
		if r, ok := find(t.Strategy, time.Duration(t.Interval)); ok {
			return r, true
		}
	}
	nearest := func(strategy string) (Result, bool) {
		var best Result
		found := false
		for _, r := range with {
			if r.Strategy != strategy || !swept(r) {
				continue
			}
			d := math.Abs(math.Log(float64(r.Sync) / float64(100*time.Millisecond)))
			if !found || d < math.Abs(math.Log(float64(best.Sync)/float64(100*time.Millisecond))) {
				best, found = r, true
			}
		}
		return best, found
	}
	for _, st := range []string{Auto, Strict} {
		if r, ok := nearest(st); ok {
			return r, true
		}
	}
	for _, r := range with {
		if swept(r) {
			return nearest(r.Strategy)
		}
	}
	return with[0], true
}

// ParseTimelineChoice reads a timeline choice, "strategy@interval" (a Go
// or wire duration: "auto@100ms"), or a strategy alone for local-only and
// central.
func ParseTimelineChoice(s string) (strategy string, interval time.Duration, err error) {
	st, iv, hasIv := strings.Cut(s, "@")
	if !validStrategy(st) {
		return "", 0, fmt.Errorf("sim: timeline %q: unknown strategy %q (want strategy@interval, e.g. auto@100ms)", s, st)
	}
	if !hasIv {
		if st != LocalOnly && st != Central {
			return "", 0, fmt.Errorf("sim: timeline %q: %s needs an interval (want strategy@interval, e.g. %s@100ms)", s, st, st)
		}
		return st, 0, nil
	}
	d, err := wire.ParseDuration(iv)
	if err != nil || d <= 0 {
		return "", 0, fmt.Errorf("sim: timeline %q: want strategy@interval with a positive interval, e.g. auto@100ms", s)
	}
	return st, time.Duration(d), nil
}
