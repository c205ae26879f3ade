package dashboard

import (
	"encoding/base64"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/history"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The history API (package history keeps it in the coordinator's store):
//
//	GET /v1/limiters/{name}/history?range=R             the limiter's total
//	GET /v1/limiters/{name}/history?range=R&key=K       one key (key_b64=B: the key's bytes in unpadded base64url)
//	GET /v1/limiters/{name}/keys?prefix=P&top=N         the kept keys starting with P, by key
//
// R is one of HistoryRanges: 1h and 24h in minutes, 7d and 30d in hours.
// The buckets are whole minutes or hours of the coordinator's clock (UTC),
// the last one the current, incomplete one.

// HistoryRanges are the spans GET .../history answers, with their
// resolution: 1h (60 minutes), 24h (1440 minutes), 7d (168 hours), 30d
// (720 hours). Default 1h.
var HistoryRanges = map[string]struct {
	Res     history.Resolution
	Buckets int64
}{
	"1h":  {history.Minute, 60},
	"24h": {history.Minute, history.MinuteBuckets},
	"7d":  {history.Hour, 7 * 24},
	"30d": {history.Hour, history.HourBuckets},
}

// HistoryView is the body of GET /v1/limiters/{name}/history. Points are
// the buckets from FromMS (Unix ms of the first bucket's start) every
// StepMS, oldest first, the last one the current bucket. In Redis mode
// every coordinator adds its minutes to the same buckets, so the points
// are the fleet's; the current minute holds this coordinator's own cost
// only until the others write theirs (once per minute). Totals is the sum
// of Points. Admitted, denied and paused are history.Counts: as the
// isolates report them (a request held for a sync and admitted after it
// counts in denied too).
type HistoryView struct {
	Limiter string `json:"limiter"`
	// Key is the key of the series; absent for the limiter's total.
	Key    *string `json:"key,omitempty"`
	KeyB64 string  `json:"key_b64,omitempty"`
	Range  string  `json:"range"`
	StepMS int64   `json:"step_ms"` // ms: 60000 (minutes) or 3600000 (hours)
	FromMS int64   `json:"from_ms"` // Unix ms
	// Points, oldest first.
	Points []history.Counts `json:"points"`
	Totals history.Counts   `json:"totals"`
	// Stats is the history's bookkeeping: the bound on kept keys, the
	// minutes not yet written, write errors.
	Stats history.Stats `json:"history"`
}

// SetHistory makes h the history the API reads (GET .../history, key
// search). Without it those routes answer 501.
func (d *Dashboard) SetHistory(h *history.Recorder) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.hist = h
	d.mu.Unlock()
}

// Restore puts the kept keys of each limiter (as stored before a restart:
// history.Recorder.Load) among its busiest keys, as of their last view,
// so the page shows them before they sync again.
func (d *Dashboard) Restore(kept map[string][]history.Kept) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, ks := range kept {
		l := d.lims[name]
		if l == nil {
			continue
		}
		for i := range ks {
			k := &ks[i]
			if k.Window == 0 && k.Count == 0 && k.Prev == 0 && k.TAT == 0 {
				continue // reset, or never viewed
			}
			l.top.observe(&wire.View{Key: k.Key, Window: k.Window, Count: k.Count, Prev: k.Prev, TAT: k.TAT}, k.At)
		}
	}
}

func (d *Dashboard) history() *history.Recorder {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hist
}

func (a *api) handleHistory(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	l := a.d.lims[name]
	if l == nil {
		a.src.Fail(w, http.StatusNotFound, "not_found", "name", "Unknown limiter", "no limiter "+strconv.Quote(name))
		return
	}
	h := a.d.history()
	if h == nil {
		a.src.Fail(w, http.StatusNotImplemented, "not_supported", "", "No history",
			"this coordinator's store keeps no history")
		return
	}
	q := r.URL.Query()
	rng := q.Get("range")
	if rng == "" {
		rng = "1h"
	}
	spec, ok := HistoryRanges[rng]
	if !ok {
		a.src.Fail(w, http.StatusBadRequest, "invalid", "range", "Invalid range", "range is one of 1h, 24h, 7d, 30d")
		return
	}
	ser := history.Series{Limiter: name, Total: true}
	out := HistoryView{Limiter: name, Range: rng}
	if q.Has("key_b64") {
		b, err := base64.RawURLEncoding.DecodeString(q.Get("key_b64"))
		if err != nil || len(b) > wire.MaxKeyLen {
			a.src.Fail(w, http.StatusBadRequest, "invalid", "key_b64", "Invalid key",
				"key_b64 is the key's bytes in unpadded base64url, at most the longest key")
			return
		}
		ser.Key, ser.Total = string(b), false
	} else if q.Has("key") {
		if k := q.Get("key"); len(k) <= wire.MaxKeyLen {
			ser.Key, ser.Total = k, false
		} else {
			a.src.Fail(w, http.StatusBadRequest, "invalid", "key", "Invalid key", "key is longer than the longest key")
			return
		}
	}
	if !ser.Total {
		k := ser.Key
		out.Key, out.KeyB64 = &k, base64.RawURLEncoding.EncodeToString([]byte(k))
	}
	now := a.src.Now()
	last := spec.Res.Bucket(now)
	from := last - spec.Buckets + 1
	pts, err := h.Read(spec.Res, ser, from, last+1)
	if err != nil {
		a.src.Fail(w, http.StatusServiceUnavailable, "unavailable", "", "History unavailable", err.Error())
		return
	}
	out.StepMS = spec.Res.Width() / int64(time.Millisecond)
	out.FromMS = from * out.StepMS
	out.Points = pts
	for _, p := range pts {
		out.Totals.Add(p)
	}
	out.Stats = h.Stats()
	writeJSON(w, out)
}

// searchKeys answers GET .../keys?prefix=P: the kept keys of the history
// and the busiest keys that start with P, by key, at most top; each as of
// its last view (the busiest keys' if newer: they carry upstream state).
func (a *api) searchKeys(w http.ResponseWriter, name string, l *dashLimiter, prefix string, top int, now int64) {
	byKey := map[string]topEntry{}
	if h := a.d.history(); h != nil {
		ks, _ := h.Search(name, prefix, history.DefaultKeysPerLimiter*100)
		for _, k := range ks {
			byKey[k.Key] = topEntry{key: k.Key, window: k.Window, count: k.Count, prev: k.Prev, tat: k.TAT, at: k.At}
		}
	}
	a.d.mu.Lock()
	for _, e := range l.top.entries() {
		if strings.HasPrefix(e.key, prefix) {
			if old, ok := byKey[e.key]; !ok || e.at >= old.at {
				byKey[e.key] = e
			}
		}
	}
	a.d.mu.Unlock()
	keys := make([]KeyView, 0, len(byKey))
	for _, e := range byKey {
		keys = append(keys, keyView(l.cfg, &e, now))
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Key < keys[j].Key })
	out := TopKeysView{Limiter: name, Algorithm: l.cfg.Algorithm, At: now, Matches: len(keys)}
	out.Keys = keys[:min(len(keys), top)]
	writeJSON(w, out)
}

// last24hEvery is how often LimiterView.Last24h is read again from the
// history: 10 s (the page polls every second).
const last24hEvery = int64(10 * time.Second)

// cached24h is a limiter's Last24h as read at (coordinator ns).
type cached24h struct {
	at int64
	c  history.Counts
}

// last24h sets Last24h of each limiter of ls from the history (cached for
// last24hEvery); a failed read leaves it unset.
func (a *api) last24h(ls []LimiterView, now int64) {
	h := a.d.history()
	if h == nil {
		return
	}
	last := history.Hour.Bucket(now)
	for i := range ls {
		name := ls[i].Name
		a.d.mu.Lock()
		c, ok := a.d.h24[name]
		a.d.mu.Unlock()
		if !ok || now-c.at >= last24hEvery || now < c.at {
			pts, err := h.Read(history.Hour, history.Series{Limiter: name, Total: true}, last-23, last+1)
			if err != nil {
				continue
			}
			c = cached24h{at: now}
			for _, p := range pts {
				c.c.Add(p)
			}
			a.d.mu.Lock()
			if a.d.h24 == nil {
				a.d.h24 = map[string]cached24h{}
			}
			a.d.h24[name] = c
			a.d.mu.Unlock()
		}
		tot := c.c
		ls[i].Last24h = &tot
	}
}
