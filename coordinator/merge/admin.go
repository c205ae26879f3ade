package merge

import (
	"errors"
	"fmt"
	"math"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// ErrUnknownLimiter is returned for a limiter name the configuration lacks.
var ErrUnknownLimiter = errors.New("merge: unknown limiter")

// KeyState is the admin view of one (limiter, key): the global view an
// isolate would get, plus the limit and the strict leases outstanding.
type KeyState struct {
	Limiter   string           `json:"limiter"`
	Key       string           `json:"key"`
	Algorithm string           `json:"algorithm"`
	Mode      string           `json:"mode"`
	Limit     int64            `json:"limit"`     // after per-key overrides
	PeriodNS  int64            `json:"period_ns"` // ns
	Window    int64            `json:"window"`    // windowed: current window index (now / period)
	Count     int64            `json:"count"`     // windowed: cost counted in Window
	Prev      int64            `json:"prev"`      // windowed: cost counted in Window-1
	TAT       int64            `json:"tat_ns"`    // bucket: theoretical arrival time, ns
	Isolates  int64            `json:"isolates"`  // isolates seen within 2 periods (in memory)
	Leases    map[string]int64 `json:"leases"`    // strict: budget of Window reserved per isolate (lease or standing lease)
	LeaseSum  int64            `json:"lease_sum"` // strict: sum of Leases
	// ExpiredLeaseSum (strict windowed) is the part of LeaseSum whose
	// lease's life is over: its isolate stopped admitting under it
	// (stopped, killed, or silent past the life) and may have admitted
	// all of it without reporting, so it stays reserved, as spent, until
	// Window ends; 0 when none.
	ExpiredLeaseSum int64 `json:"expired_lease_sum"`
	At              int64 `json:"at_ns"` // coordinator time of the view, ns
	// Upstream is what the isolates learnt of the key's upstream (see
	// upstream.go); absent when nothing.
	Upstream *UpstreamState `json:"upstream,omitempty"`
}

// UpstreamState is the admin view of a key's upstream state.
type UpstreamState struct {
	PausedNS  int64  `json:"paused_ns"`           // the key stays paused this long (0: not paused)
	Circuit   string `json:"circuit"`             // "closed", "open" or "half-open"
	OpenNS    int64  `json:"open_ns,omitempty"`   // open: it stays open this long
	Failures  int64  `json:"failures"`            // consecutive failures reported while closed
	Probe     string `json:"probe,omitempty"`     // half-open: the isolate holding the probe
	Announced int64  `json:"announced_limit"`     // the limit agreed from the isolates' reports (0: none)
	Reporters int    `json:"announced_reporters"` // isolates whose announced limit is kept
}

// KeyState returns the state of (limiter, key) at time now.
func (m *Merger) KeyState(limiter, key string, now int64) (*KeyState, error) {
	m.refreshLimits()
	lim := m.lims[limiter]
	if lim == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownLimiter, limiter)
	}
	if err := m.recovered(); err != nil {
		return nil, err
	}
	st, err := m.loadKey(lim, key, nil, 0, now)
	if err != nil {
		return nil, err
	}
	ks := &KeyState{Limiter: limiter, Key: key, Algorithm: lim.Algorithm, Mode: lim.Mode,
		Limit: lim.LimitFor(key), PeriodNS: lim.Period, At: now, Leases: map[string]int64{}}
	if ks.Mode == "" {
		ks.Mode = wire.Approximate
	}
	w := int64(0)
	if lim.IsBucket() {
		ks.TAT = st.tat
	} else {
		w = max(limitmath.Window(now, lim.Period), st.win)
		ks.Window = w
		ks.Count, ks.Prev = st.windowCounts(w)
	}
	ks.Isolates = st.recentIsolates(now)
	if st.upActive(now) {
		var v wire.UpView
		st.upView(key, "", now, &v)
		ks.Upstream = &UpstreamState{PausedNS: v.Pause, Circuit: [...]string{"closed", "open", "half-open"}[v.Circuit],
			OpenNS: v.Open, Failures: st.up.fails, Announced: v.Limit, Reporters: len(st.up.reps)}
		if v.Circuit == wire.CircuitHalfOpen && now < st.up.probeUntil {
			ks.Upstream.Probe = st.up.probeIso
		}
		ks.Limit = st.limitFor(key, now)
	}
	for i := range st.isos {
		is := &st.isos[i]
		if r := st.reservation(is, w, now); lim.Leased() && r > 0 {
			ks.Leases[is.id] = r
			ks.LeaseSum = addSat(ks.LeaseSum, r)
			if m.leaseExpired(is, now) && !lim.IsBucket() {
				ks.ExpiredLeaseSum = addSat(ks.ExpiredLeaseSum, r)
			}
		}
	}
	return ks, nil
}

// Reset clears (limiter, key): counts, bucket, leases and upstream state
// (pause, circuit, announced limits). It is staged for the next Commit.
// An isolate still holding a strict lease on the key may admit up to it
// until it hears of the reset: with its next reply when the reset is
// made through ResetAt (resetlog.go), as Coordinator.ResetKey does.
func (m *Merger) Reset(limiter, key string) error {
	lim := m.lims[limiter]
	if lim == nil {
		return fmt.Errorf("%w %q", ErrUnknownLimiter, limiter)
	}
	if err := m.recovered(); err != nil {
		return err
	}
	st, err := m.loadKey(lim, key, nil, 0, 0) // cleared: nothing to fit
	if err != nil {
		return err
	}
	m.isoEntries -= len(st.isos)
	st.win, st.count, st.prev, st.tat, st.isos, st.oldest = 0, 0, 0, 0, nil, math.MinInt64
	st.sk, st.up = isoSketch{}, nil
	m.markKey(st)
	return nil
}
