package sim

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
