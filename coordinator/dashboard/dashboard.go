// Package dashboard is the coordinator's dashboard: the page GET /ui
// (ui.go, ui/index.html) and the JSON API it polls (api_dashboard.go),
// fed incrementally by the merge (Applied) and by the coordinator (Synced,
// Forget, Committed), so no request reads the store. It reaches the
// coordinator only through the Source interface; it imports neither the
// merge nor the stores.
package dashboard

import (
	"cmp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/history"
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Dashboard bounds: the work of every dashboard request is bounded by these,
// whatever the number of keys stored.
const (
	// DashboardTopKeys is the most keys kept per limiter for GET
	// /v1/limiters/{name}/keys?top=N (a larger N is refused with 400): 100.
	DashboardTopKeys = 100
	// dashIsolates is the most isolates remembered. Past it the eighth of
	// the isolates of the scope (token) that has the most that synced
	// least recently is forgotten: a client that makes up isolate ids
	// forgets its own, not another token's, and the scan is paid once per
	// eighth.
	dashIsolates = 10000
	// dashRateSeconds is the length of the per-second rate ring.
	dashRateSeconds = 64
	// dashLatencies is how many recent commit latencies are kept.
	dashLatencies = 256
)

// Dashboard is what GET /ui and its JSON API show, kept incrementally as
// batches are merged (no scan of the store): per limiter the busiest keys
// (topKeys) and per-second admitted and denied cost; per isolate its last
// sync and errors; the latencies of the recent commits. It is best effort:
// a batch merged and then lost to a failed commit has been counted here.
// Its methods are safe for concurrent use, and do nothing on a nil
// *Dashboard.
type Dashboard struct {
	mu    sync.Mutex
	cfg   wire.Config
	start int64
	lims  map[string]*dashLimiter
	isos  map[string]*dashIsolate // scope + isolate id
	// scopes counts the isolates of isos by scope.
	scopes map[string]int
	lat    [dashLatencies]time.Duration
	nlat   int64
	hist   *history.Recorder // the usage history (api_history.go), or nil
	h24    map[string]cached24h
}

// dashLimiter is the dashboard's view of one limiter.
type dashLimiter struct {
	cfg      *wire.LimiterConfig
	top      *topKeys
	admitted int64 // total cost admitted (sum of Delta) since start
	denied   int64 // total cost refused for good (wire.Batch.EachDenial) since start
	sec      [dashRateSeconds]dashSecond
}

// dashSecond is the cost admitted and denied in one second of the ring.
type dashSecond struct {
	unix             int64
	admitted, denied int64
}

// dashIsolate is the dashboard's view of one isolate.
type dashIsolate struct {
	scope, id   string
	lastSync    int64 // ns, last batch answered (applied or retried)
	lastWork    int64 // ns, last answered batch with something in it (not a heartbeat)
	firstSeen   int64 // ns
	syncs       int64 // batches answered
	errors      int64 // batches refused
	lastError   string
	lastErrorAt int64 // ns
	ended       bool  // its last answered batch was its graceful stop (isolates.go)
	gaps        [gapSamples]int64
	ngaps       int // gaps recorded (isolates.go: cadence)
}

// New returns a Dashboard of the limiters of cfg, started at now (ns).
func New(cfg wire.Config, now int64) *Dashboard {
	d := &Dashboard{cfg: cfg, start: now, lims: map[string]*dashLimiter{}, isos: map[string]*dashIsolate{},
		scopes: map[string]int{}}
	for i := range cfg.Limiters {
		l := &cfg.Limiters[i]
		d.lims[l.Name] = &dashLimiter{cfg: l, top: newTopKeys(DashboardTopKeys)}
	}
	return d
}

// Applied records an applied (not duplicate) batch b and its reply rp at
// now (ns).
func (d *Dashboard) Applied(b *wire.Batch, rp *wire.Reply, now int64) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s := now / int64(time.Second)
	second := func(l *dashLimiter) *dashSecond {
		sec := &l.sec[s%dashRateSeconds]
		if sec.unix != s {
			*sec = dashSecond{unix: s}
		}
		return sec
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		if l := d.lims[e.Limiter]; l != nil {
			l.admitted = AddTotal(l.admitted, e.Delta)
			sec := second(l)
			sec.admitted = limitmath.AddSat(sec.admitted, e.Delta)
		}
	}
	b.EachDenial(func(limiter, _ string, _, cost int64) {
		if l := d.lims[limiter]; l != nil {
			l.denied = AddTotal(l.denied, cost)
			sec := second(l)
			sec.denied = limitmath.AddSat(sec.denied, cost)
		}
	})
	for i := range rp.Entries {
		v := &rp.Entries[i]
		if l := d.lims[v.Limiter]; l != nil {
			l.top.observe(v, now)
		}
	}
	for i := range rp.Upstream {
		u := &rp.Upstream[i]
		if l := d.lims[u.Limiter]; l != nil {
			l.top.upstream(u, now)
		}
	}
}

// Synced records the outcome err (nil: answered) of a sync of isolate id in
// scope (the token's namespace, "" without tokens) at now (ns); work says
// whether the batch carried anything (entries, denials, signals), not only
// a sign of life (a heartbeat, wire.Config.Heartbeat).
func (d *Dashboard) Synced(scope, id string, work bool, err error, now int64) {
	if d == nil || id == "" || len(id) > wire.MaxIsolateIDLen {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k := scope + id
	is := d.isos[k]
	if is == nil {
		if len(d.isos) >= dashIsolates {
			d.forgetIsolates()
		}
		is = &dashIsolate{scope: scope, id: id, firstSeen: now}
		d.isos[k] = is
		d.scopes[scope]++
	}
	if err != nil {
		is.errors++
		is.lastError, is.lastErrorAt = err.Error(), now
		return
	}
	if is.syncs > 0 {
		is.noteGap(now - is.lastSync)
	}
	is.syncs++
	is.lastSync = now
	if work {
		is.lastWork = now
	}
	is.ended = false
}

// forgetIsolates forgets the eighth (at least one) of the isolates of the
// scope with the most that synced least recently (see dashIsolates; d.mu
// held).
func (d *Dashboard) forgetIsolates() {
	var big string
	for sc, n := range d.scopes {
		if n > d.scopes[big] {
			big = sc
		}
	}
	type aged struct {
		k  string
		at int64
	}
	var old []aged
	for k, is := range d.isos {
		if is.scope == big {
			old = append(old, aged{k, max(is.lastSync, is.lastErrorAt)})
		}
	}
	slices.SortFunc(old, func(a, b aged) int { return cmp.Compare(a.at, b.at) })
	n := min(max(len(old)/8, 1), len(old))
	for _, o := range old[:n] {
		delete(d.isos, o.k)
	}
	if d.scopes[big] -= n; d.scopes[big] <= 0 {
		delete(d.scopes, big)
	}
}

// Forget drops (limiter, key) from the busiest keys after a reset.
func (d *Dashboard) Forget(limiter, key string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if l := d.lims[limiter]; l != nil {
		l.top.forget(key)
	}
}

// Committed records the latency of one synced group commit.
func (d *Dashboard) Committed(lat time.Duration) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.lat[d.nlat%dashLatencies] = lat
	d.nlat++
	d.mu.Unlock()
}

// rates returns the cost admitted and denied per second over the last
// window seconds before the current (incomplete) second.
func (l *dashLimiter) rates(now int64, window int64) (admitted, denied float64) {
	s := now / int64(time.Second)
	var a, dn int64
	for k := s - window; k < s; k++ {
		if sec := &l.sec[k%dashRateSeconds]; sec.unix == k {
			a, dn = a+sec.admitted, dn+sec.denied
		}
	}
	return float64(a) / float64(window), float64(dn) / float64(window)
}

// latencies returns the recent commit latencies, sorted.
func (d *Dashboard) latencies() []time.Duration {
	n := min(d.nlat, dashLatencies)
	out := slices.Clone(d.lat[:n])
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
