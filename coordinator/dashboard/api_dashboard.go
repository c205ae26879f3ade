package dashboard

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/history"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// The dashboard's JSON API (behind the same bearer tokens as /v1/*):
//
//	GET /v1/limiters                    LimitersView: each limiter, its admitted and denied cost, the coordinator's health
//	GET /v1/limiters/{name}/keys?top=N  TopKeysView: the N busiest keys (default 20, 1..DashboardTopKeys)
//	GET /v1/limiters/{name}/keys?prefix=P&top=N  TopKeysView: the first N kept keys starting with P (prefix_b64: its bytes in base64url), by key (api_history.go)
//	GET /v1/limiters/{name}/history?range=R[&key=K|&key_b64=B]  HistoryView: admitted, denied and paused per minute or hour (api_history.go)
//	GET /v1/isolates?within=D           IsolatesView: isolates that synced within D (Go duration, default 10m) of the caller's token
//
// Every figure comes from what the coordinator merged (topn.go,
// dashboard.go); no request reads the store, so each is bounded whatever
// the number of keys.

// DefaultTopKeys is the number of keys GET /v1/limiters/{name}/keys answers
// without ?top: 20.
const DefaultTopKeys = 20

// NearLimitFraction is the share of its limit above which a key is marked
// near_limit: 0.8.
const NearLimitFraction = 0.8

// rateWindowSeconds is the span of the per-second rates, in seconds.
const rateWindowSeconds = 10

// LimitersView is the body of GET /v1/limiters.
type LimitersView struct {
	At          int64           `json:"at_ns"` // coordinator time, ns
	Coordinator CoordinatorView `json:"coordinator"`
	Limiters    []LimiterView   `json:"limiters"`
}

// CoordinatorView is the coordinator's own health.
type CoordinatorView struct {
	StoreHealthy  bool    `json:"store_healthy"`
	StoreError    string  `json:"store_error,omitempty"`
	UptimeSeconds float64 `json:"uptime_s"`
	KeysCached    int     `json:"keys_cached"`
	// Commits is the number of recent synced group commits the latencies
	// are taken from (the last 256 at most).
	Commits     int     `json:"recent_commits"`
	CommitP50MS float64 `json:"commit_p50_ms"` // ms
	CommitP99MS float64 `json:"commit_p99_ms"` // ms
	CommitMaxMS float64 `json:"commit_max_ms"` // ms
}

// LimiterView is one limiter of GET /v1/limiters. Admitted is the cost the
// isolates admitted (the sum of the batches' Delta); Denied is the cost they
// refused for good (wire.Batch.EachDenial: their final denials, or
// Demand - Delta from modules that do not report them). Both are as synced: they trail the
// isolates by up to one sync interval. Rates are per second over the last
// RateWindow seconds (the current second excluded).
type LimiterView struct {
	Name        string  `json:"name"`
	Algorithm   string  `json:"algorithm"`
	Mode        string  `json:"mode"`
	Limit       int64   `json:"limit"`
	Burst       int64   `json:"burst,omitempty"`
	PeriodNS    int64   `json:"period_ns"` // ns
	Period      string  `json:"period"`    // Go duration
	Admitted    int64   `json:"admitted_total"`
	Denied      int64   `json:"denied_total"`
	AdmittedPS  float64 `json:"admitted_per_s"`
	DeniedPS    float64 `json:"denied_per_s"`
	RateWindow  int     `json:"rate_window_s"` // s
	TrackedKeys int     `json:"tracked_keys"`  // keys in the busiest-keys set (at most DashboardTopKeys)
	// Last24h is the limiter's cost in the history's last 24 hour buckets
	// (the current one included): in Redis mode every coordinator's, so
	// the fleet's totals. Refreshed at most every 10 s; absent without a
	// history (api_history.go).
	Last24h *history.Counts `json:"last_24h,omitempty"`
}

// TopKeysView is the body of GET /v1/limiters/{name}/keys.
type TopKeysView struct {
	Limiter   string    `json:"limiter"`
	Algorithm string    `json:"algorithm"`
	At        int64     `json:"at_ns"`
	Keys      []KeyView `json:"keys"` // busiest first; by key for a search (?prefix=)
	// Matches is, for a search, how many kept keys start with the prefix
	// (Keys holds the first top of them by key).
	Matches int `json:"matches,omitempty"`
}

// KeyView is one key of TopKeysView, as of its last sync. Count is the cost
// used now: the current window's count (fixed window), the sliding-window
// estimate (count + prev weighted by what is left of the window), or the
// part of the bucket in use (token bucket, GCRA; Limit is then the
// capacity). Reset is when the count next drops: the window's end, or
// when the bucket is full again.
type KeyView struct {
	Key string `json:"key"` // as JSON text: bytes that are not UTF-8 show as U+FFFD
	// KeyB64 is the key's exact bytes in unpadded base64url (RFC 4648
	// §5), what the page resets it by: DELETE
	// /v1/limiters/{name}/keys/{key_b64}?encoding=base64url.
	KeyB64    string  `json:"key_b64"`
	Count     int64   `json:"count"`
	Limit     int64   `json:"limit"` // after per-key overrides
	Remaining int64   `json:"remaining"`
	Used      float64 `json:"used"`     // Count / Limit
	ResetMS   int64   `json:"reset_ms"` // ms from now
	NearLimit bool    `json:"near_limit"`
	Isolates  int64   `json:"isolates"`   // isolates that recently reported the key
	UpdatedMS int64   `json:"updated_ms"` // ms since the key's last sync
	// PauseLeftMS is how long the key stays paused fleet-wide (an
	// upstream's 429 or an operator's pause), ms from now; 0: not paused.
	PauseLeftMS int64 `json:"pause_left_ms"`
	// Circuit is the key's fleet-wide upstream circuit: "closed", "open"
	// (denied until CircuitOpenMS from now) or "half-open" (one probe at a
	// time), as of the key's last reply. Shared mode (Redis) keeps no
	// upstream state: always "closed".
	Circuit       string `json:"circuit"`
	CircuitOpenMS int64  `json:"circuit_open_ms,omitempty"`
}

// IsolatesView is the body of GET /v1/isolates.
type IsolatesView struct {
	At       int64         `json:"at_ns"`
	Within   string        `json:"within"`
	Isolates []IsolateView `json:"isolates"` // by host, then id; at most 1000
}

// IsolateView is one isolate that synced (or tried to) recently.
// LastSyncAgeMS is -1 when no sync of it succeeded. State is active,
// idle, silent, stopped or failing, from its cadence (CadenceMS: the
// median gap between its recent syncs) and its host's other isolates
// (isolates.go); Host is its edge host (HostOf).
type IsolateView struct {
	ID             string `json:"id"`
	Host           string `json:"host"`
	State          string `json:"state"`
	CadenceMS      int64  `json:"cadence_ms"`
	LastSyncAgeMS  int64  `json:"last_sync_age_ms"`
	Syncs          int64  `json:"syncs"`
	Errors         int64  `json:"errors"`
	LastError      string `json:"last_error,omitempty"`
	LastErrorAgeMS int64  `json:"last_error_age_ms,omitempty"`
	FirstSeenAgeMS int64  `json:"first_seen_age_ms"`
}

// Source is what the dashboard's API reads from the coordinator it shows,
// besides what it is fed (Applied, Synced, Forget, Committed).
type Source interface {
	// Now returns the coordinator's time, ns.
	Now() int64
	// Healthy returns nil when the store takes writes, else why it does not.
	Healthy() error
	// CachedKeys returns the number of key states the merge holds in memory.
	CachedKeys() int
	// Scope returns the isolate namespace of r's bearer token and whether
	// tokens scope the isolates (false: every isolate is shown).
	Scope(r *http.Request) (scope string, scoped bool)
	// Fail answers an error as the coordinator's API does (problem+json,
	// type urn:edgelimit:problem:KIND, with the offending field).
	Fail(w http.ResponseWriter, status int, kind, field, title, detail string)
}

// api serves the JSON API of d over src.
type api struct {
	d   *Dashboard
	src Source
}

// maxIsolatesListed caps GET /v1/isolates.
const maxIsolatesListed = 1000

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

func (a *api) handleLimiters(w http.ResponseWriter, r *http.Request) {
	now := a.src.Now()
	out := LimitersView{At: now, Limiters: []LimiterView{}}
	out.Coordinator.KeysCached = a.src.CachedKeys()
	if err := a.src.Healthy(); err != nil {
		out.Coordinator.StoreError = err.Error()
	} else {
		out.Coordinator.StoreHealthy = true
	}
	d := a.d
	d.mu.Lock()
	out.Coordinator.UptimeSeconds = float64(now-d.start) / 1e9
	lat := d.latencies()
	for i := range d.cfg.Limiters {
		cfg := &d.cfg.Limiters[i]
		l := d.lims[cfg.Name]
		mode := cfg.Mode
		if mode == "" {
			mode = wire.Approximate
		}
		a, dn := l.rates(now, rateWindowSeconds)
		out.Limiters = append(out.Limiters, LimiterView{Name: cfg.Name, Algorithm: cfg.Algorithm, Mode: mode,
			Limit: cfg.Limit, Burst: cfg.Burst, PeriodNS: cfg.Period, Period: time.Duration(cfg.Period).String(),
			Admitted: l.admitted, Denied: l.denied, AdmittedPS: a, DeniedPS: dn, RateWindow: rateWindowSeconds,
			TrackedKeys: len(l.top.h)})
	}
	d.mu.Unlock()
	a.last24h(out.Limiters, now)
	if n := len(lat); n > 0 {
		ms := func(x time.Duration) float64 { return float64(x) / 1e6 }
		out.Coordinator.Commits = n
		out.Coordinator.CommitP50MS = ms(lat[n/2])
		out.Coordinator.CommitP99MS = ms(lat[min(n-1, n*99/100)])
		out.Coordinator.CommitMaxMS = ms(lat[n-1])
	}
	writeJSON(w, out)
}

func (a *api) handleTopKeys(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	top := DefaultTopKeys
	if q := r.URL.Query().Get("top"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > DashboardTopKeys {
			a.src.Fail(w, http.StatusBadRequest, "invalid", "top", "Invalid top",
				"top is an integer from 1 to "+strconv.Itoa(DashboardTopKeys))
			return
		}
		top = n
	}
	d := a.d
	l := d.lims[name] // the map is not written after New
	if l == nil {
		a.src.Fail(w, http.StatusNotFound, "not_found", "name", "Unknown limiter", "no limiter "+strconv.Quote(name))
		return
	}
	now := a.src.Now()
	if q := r.URL.Query(); q.Has("prefix") || q.Has("prefix_b64") {
		prefix := q.Get("prefix")
		if q.Has("prefix_b64") {
			b, err := base64.RawURLEncoding.DecodeString(q.Get("prefix_b64"))
			if err != nil {
				a.src.Fail(w, http.StatusBadRequest, "invalid", "prefix_b64", "Invalid prefix",
					"prefix_b64 is the prefix's bytes in unpadded base64url")
				return
			}
			prefix = string(b)
		}
		a.searchKeys(w, name, l, prefix, top, now)
		return
	}
	d.mu.Lock()
	es := l.top.entries()
	cfg := l.cfg // SetLimits replaces it
	d.mu.Unlock()
	keys := make([]KeyView, len(es))
	for i := range es {
		keys[i] = keyView(cfg, &es[i], now)
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if keys[i].Used != keys[j].Used {
			return keys[i].Used > keys[j].Used
		}
		if keys[i].Count != keys[j].Count {
			return keys[i].Count > keys[j].Count
		}
		return keys[i].Key < keys[j].Key
	})
	if len(keys) > top {
		keys = keys[:top]
	}
	writeJSON(w, TopKeysView{Limiter: name, Algorithm: cfg.Algorithm, At: now, Keys: keys})
}

// keyView computes what a key uses now from its last view e (UsageOf).
func keyView(cfg *wire.LimiterConfig, e *topEntry, now int64) KeyView {
	u := UsageOf(cfg, e.key, e.window, e.count, e.prev, e.tat, now)
	kv := KeyView{Key: e.key, KeyB64: base64.RawURLEncoding.EncodeToString([]byte(e.key)), Count: u.Count, Limit: u.Limit, ResetMS: u.Reset / 1e6,
		Isolates: e.isolates, UpdatedMS: max(now-e.at, 0) / 1e6}
	kv.Remaining = max(kv.Limit-kv.Count, 0)
	kv.Used = u.Used()
	kv.NearLimit = kv.Used > NearLimitFraction
	kv.PauseLeftMS = max(e.pauseEnd-now, 0) / 1e6
	kv.Circuit = "closed"
	switch {
	case e.circuit == wire.CircuitOpen && e.openEnd > now:
		kv.Circuit, kv.CircuitOpenMS = "open", (e.openEnd-now)/1e6
	case e.circuit == wire.CircuitHalfOpen, e.circuit == wire.CircuitOpen:
		kv.Circuit = "half-open" // an open circuit past its open time lets a probe through
	}
	return kv
}

func (a *api) handleIsolates(w http.ResponseWriter, r *http.Request) {
	within := 10 * time.Minute
	if q := r.URL.Query().Get("within"); q != "" {
		d, err := time.ParseDuration(q)
		if err != nil || d <= 0 {
			a.src.Fail(w, http.StatusBadRequest, "invalid", "within", "Invalid within",
				"within is a positive Go duration such as 30s or 10m")
			return
		}
		within = d
	}
	now := a.src.Now()
	scope, scoped := a.src.Scope(r)
	out := IsolatesView{At: now, Within: within.String(), Isolates: []IsolateView{}}
	d := a.d
	d.mu.Lock()
	hosts := d.liveHosts(now)
	for _, is := range d.isos {
		if scoped && is.scope != scope {
			continue
		}
		if max(is.lastSync, is.lastErrorAt) < now-int64(within) {
			continue
		}
		host := HostOf(is.id)
		others := hosts[is.scope+"\x00"+host] && !is.syncing(now)
		v := IsolateView{ID: is.id, Host: host, State: is.state(now, others), CadenceMS: is.cadence() / 1e6,
			LastSyncAgeMS: -1, Syncs: is.syncs, Errors: is.errors,
			LastError: is.lastError, FirstSeenAgeMS: (now - is.firstSeen) / 1e6}
		if is.syncs > 0 {
			v.LastSyncAgeMS = max(now-is.lastSync, 0) / 1e6
		}
		if is.errors > 0 {
			v.LastErrorAgeMS = max(now-is.lastErrorAt, 0) / 1e6
		}
		out.Isolates = append(out.Isolates, v)
	}
	d.mu.Unlock()
	sort.Slice(out.Isolates, func(i, j int) bool {
		if out.Isolates[i].Host != out.Isolates[j].Host {
			return out.Isolates[i].Host < out.Isolates[j].Host
		}
		return out.Isolates[i].ID < out.Isolates[j].ID
	})
	if len(out.Isolates) > maxIsolatesListed {
		out.Isolates = out.Isolates[:maxIsolatesListed]
	}
	writeJSON(w, out)
}
