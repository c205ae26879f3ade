package coordinator

import (
	"sort"
	"strings"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// dashboard is what the coordinator keeps for its dashboard (/ui and the
// JSON API in api.go), updated as deltas are applied: per limiter, the
// busiest keys and the cost admitted and denied since the process
// started. Memory is bounded by the limiters (topKeysSize keys each).
type dashboard struct {
	tops   map[string]*topKeys
	totals map[string]*limiterTotals
}

// limiterTotals counts a limiter's cost since the process started.
type limiterTotals struct {
	Admitted int64 `json:"admitted_total"` // cost the isolates admitted and reported
	Denied   int64 `json:"denied_total"`   // cost they were asked for and did not admit (demand - delta)
}

func (d *dashboard) top(limiter string) *topKeys {
	if d.tops == nil {
		d.tops = map[string]*topKeys{}
	}
	t := d.tops[limiter]
	if t == nil {
		t = newTopKeys(topKeysSize)
		d.tops[limiter] = t
	}
	return t
}

func (d *dashboard) applied(limiter string, admitted, denied int64) {
	if d.totals == nil {
		d.totals = map[string]*limiterTotals{}
	}
	t := d.totals[limiter]
	if t == nil {
		t = &limiterTotals{}
		d.totals[limiter] = t
	}
	t.Admitted = addSat(t.Admitted, admitted)
	t.Denied = addSat(t.Denied, denied)
}

// LimiterInfo describes a limiter for the dashboard.
type LimiterInfo struct {
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
	Limit     int64  `json:"limit"`
	PeriodNS  int64  `json:"period_ns"`
	Burst     int64  `json:"burst,omitempty"`
	Mode      string `json:"mode"`
	limiterTotals
}

// Limiters describes every limiter with its totals, in name order.
func (m *Merger) Limiters() []LimiterInfo {
	var out []LimiterInfo
	for name, l := range m.lims {
		li := LimiterInfo{Name: name, Algorithm: l.Algorithm, Limit: l.Limit, PeriodNS: l.Period, Burst: l.Burst, Mode: l.Mode}
		if li.Mode == "" {
			li.Mode = wire.Approximate
		}
		if t := m.dash.totals[name]; t != nil {
			li.limiterTotals = *t
		}
		out = append(out, li)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// TopKeys returns the state of limiter's n busiest keys at now, busiest
// first (at most topKeysSize).
func (m *Merger) TopKeys(limiter string, n int, now int64) ([]*KeyState, error) {
	if m.lims[limiter] == nil {
		return nil, ErrUnknownLimiter
	}
	var out []*KeyState
	for _, e := range m.dash.top(limiter).list(n) {
		ks, err := m.KeyState(limiter, e.key, now)
		if err != nil {
			return nil, err
		}
		out = append(out, ks)
	}
	return out, nil
}

// IsolateInfo is an edge isolate as the coordinator last saw it.
type IsolateInfo struct {
	ID            string `json:"id"`
	Seq           int64  `json:"seq"`              // last batch applied
	LastSyncAgeMS int64  `json:"last_sync_age_ms"` // since that batch, ms
}

// Isolates returns the isolates of namespace scope ("" when the
// coordinator has no tokens: all of them) seen within horizon ns of now,
// most recent first, at most max. Ids are shown without the scope.
func (m *Merger) Isolates(scope string, now, horizon int64, max int) []IsolateInfo {
	var out []IsolateInfo
	for id, h := range m.hwms {
		if h.seen < now-horizon {
			continue
		}
		if scope != "" {
			rest, ok := strings.CutPrefix(id, scope)
			if !ok {
				continue
			}
			id = rest
		}
		out = append(out, IsolateInfo{ID: id, Seq: h.seq, LastSyncAgeMS: (now - h.seen) / 1e6})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].LastSyncAgeMS != out[j].LastSyncAgeMS {
			return out[i].LastSyncAgeMS < out[j].LastSyncAgeMS
		}
		return out[i].ID < out[j].ID
	})
	if len(out) > max {
		out = out[:max]
	}
	return out
}
