package sim

import (
	"fmt"
	"strconv"
	"time"
)

// Upstream models the API behind the limiters: every admitted request is
// sent to it, and it answers with its own true limit per key (a fixed
// window of its own phase, possibly lower than the configured limit and
// changing over time): 200 within the limit, 429 beyond it, 503 during an
// outage, with the rate-limit headers of Headers. Strategies named with
// FeedbackSuffix give every answer to the isolate that sent the request
// (Observe), as an edge host's code does after each upstream call; the
// others never learn from the upstream.
type Upstream struct {
	// Limit is the upstream's true limit per Period and key. Required.
	Limit int64 `json:"limit"`
	// Period is the upstream's window. Default the first limiter's period.
	Period Duration `json:"period,omitempty"`
	// Phase is where the upstream's windows start, modulo Period (its
	// windows are not the limiter's). Default half the period.
	Phase *Duration `json:"phase,omitempty"`
	// Changes change Limit during the run (a quota that drops mid-run).
	Changes []UpstreamChange `json:"changes,omitempty"`
	// Headers is what the upstream tells: "openai" (default:
	// x-ratelimit-limit-requests, -remaining-requests and
	// -reset-requests with ms precision, on every answer), "ietf"
	// (RateLimit-Policy and RateLimit in whole seconds, Retry-After on a
	// 429) or "retry-after" (only Retry-After, whole seconds, on a 429).
	Headers string `json:"headers,omitempty"`
	// Latency is how long after a request is admitted its answer reaches
	// the isolate. Default 0.
	Latency Duration `json:"latency,omitempty"`
	// Outages are times the upstream answers 503 without Retry-After
	// (failures that open circuits).
	Outages []Outage `json:"outages,omitempty"`
}

// UpstreamChange sets the upstream's limit to Limit from At on.
type UpstreamChange struct {
	At    Duration `json:"at"`
	Limit int64    `json:"limit"`
}

// Outage is a time the upstream fails: from Start for Duration.
type Outage struct {
	Start    Duration `json:"start"`
	Duration Duration `json:"duration"`
}

// FeedbackSuffix names the variant of an edgelimit strategy whose isolates
// observe the upstream's answers ("auto+feedback").
const FeedbackSuffix = "+feedback"

func (u *Upstream) ensureDefaults(firstPeriod time.Duration) {
	if u.Period == 0 {
		u.Period = Duration(firstPeriod)
	}
	if u.Phase == nil {
		p := u.Period / 2
		u.Phase = &p
	}
	if u.Headers == "" {
		u.Headers = "openai"
	}
}

func (u *Upstream) validate(bad func(string, ...any)) {
	if u.Limit < 1 {
		bad("upstream.limit must be >= 1")
	}
	if u.Period <= 0 {
		bad("upstream.period must be positive")
	}
	switch u.Headers {
	case "openai", "ietf", "retry-after":
	default:
		bad("upstream.headers: want openai, ietf or retry-after, got %q", u.Headers)
	}
	if u.Latency < 0 {
		bad("upstream.latency must be >= 0")
	}
	for i, c := range u.Changes {
		if c.Limit < 1 || c.At < 0 {
			bad("upstream.changes[%d]: want at >= 0 and limit >= 1", i)
		}
	}
	for i, o := range u.Outages {
		if o.Start < 0 || o.Duration <= 0 {
			bad("upstream.outages[%d]: want start >= 0 and a positive duration", i)
		}
	}
}

// upstream is the model's state in one run.
type upstream struct {
	cfg  *Upstream
	keys []upKey // by key gid
	// parked answers on their way back to an isolate (evUpstream events
	// carry the index); free lists the free slots.
	parked []upAnswer
	free   []uint64

	events, worst, refused429, accepted, failed int64
	utilNum, utilDen                            int64
}

type upKey struct {
	win, used, offered int64
	limit              int64           // the true limit when the window began
	refused            map[int32]int64 // 429s per isolate in this window
}

type upAnswer struct {
	gid     int32
	status  int64
	headers [][2]string
}

func newUpstream(cfg *Upstream, keys int) *upstream {
	u := &upstream{cfg: cfg, keys: make([]upKey, keys)}
	for i := range u.keys {
		u.keys[i].win = -1
	}
	return u
}

// limit is the upstream's true limit at now.
func (u *upstream) limit(now int64) int64 {
	l := u.cfg.Limit
	for _, c := range u.cfg.Changes {
		if now >= int64(c.At) {
			l = c.Limit
		}
	}
	return l
}

// window returns the upstream's window index at now and its end.
func (u *upstream) window(now int64) (w, end int64) {
	P, ph := int64(u.cfg.Period), int64(*u.cfg.Phase)%int64(u.cfg.Period)
	w = (now - ph + P) / P // + P: no negative index before the first boundary
	return w, w*P + ph
}

// roll moves key gid to the upstream window of now, accounting the one
// that ended. Time only moves forward: a request that reaches the upstream
// late (after a later one opened the next window) counts in the current
// window.
func (u *upstream) roll(gid int32, now int64) *upKey {
	k := &u.keys[gid]
	w, _ := u.window(now)
	if w > k.win {
		u.flush(k)
		k.win, k.used, k.offered, k.limit = w, 0, 0, u.limit(now)
	}
	return k
}

func (u *upstream) flush(k *upKey) {
	if k.win < 0 {
		return
	}
	u.utilNum += k.used
	u.utilDen += min(k.offered, k.limit)
	if len(k.refused) > 0 {
		u.events++
		for _, n := range k.refused {
			u.worst = max(u.worst, n)
		}
		clear(k.refused)
	}
}

// arrive counts a request of key gid that arrived at now, admitted or not:
// the demand the upstream's limit could have served.
func (u *upstream) arrive(gid int32, now, cost int64) {
	u.roll(gid, now).offered += cost
}

// answer is the upstream's answer to a request of key gid from isolate iso
// at now.
func (u *upstream) answer(gid int32, iso int, now, cost int64) (int64, [][2]string) {
	k := u.roll(gid, now)
	for _, o := range u.cfg.Outages {
		if now >= int64(o.Start) && now < int64(o.Start+o.Duration) {
			u.failed++
			return 503, nil
		}
	}
	limit := k.limit
	_, end := u.window(now)
	status := int64(200)
	if k.used+cost <= limit {
		k.used += cost
		u.accepted += cost
	} else {
		status = 429
		u.refused429++
		if k.refused == nil {
			k.refused = map[int32]int64{}
		}
		k.refused[int32(iso)]++
	}
	remaining := max(limit-k.used, 0)
	reset := end - now
	secs := strconv.FormatInt((reset+1e9-1)/1e9, 10)
	var h [][2]string
	switch u.cfg.Headers {
	case "openai":
		h = [][2]string{{"x-ratelimit-limit-requests", strconv.FormatInt(limit, 10)},
			{"x-ratelimit-remaining-requests", strconv.FormatInt(remaining, 10)},
			{"x-ratelimit-reset-requests", strconv.FormatInt(max(reset/1e6, 1), 10) + "ms"}}
	case "ietf":
		w := strconv.FormatInt(int64(u.cfg.Period)/1e9, 10)
		if u.cfg.Period < Duration(time.Second) {
			w = "1"
		}
		h = [][2]string{{"RateLimit-Policy", `"default";q=` + strconv.FormatInt(limit, 10) + ";w=" + w},
			{"RateLimit", `"default";r=` + strconv.FormatInt(remaining, 10) + ";t=" + secs}}
		if status == 429 {
			h = append(h, [2]string{"Retry-After", secs})
		}
	case "retry-after":
		if status == 429 {
			h = [][2]string{{"Retry-After", secs}}
		}
	}
	return status, h
}

// park keeps an answer until its evUpstream event and returns its index.
func (u *upstream) park(a upAnswer) uint64 {
	if n := len(u.free); n > 0 {
		i := u.free[n-1]
		u.free = u.free[:n-1]
		u.parked[i] = a
		return i
	}
	u.parked = append(u.parked, a)
	return uint64(len(u.parked) - 1)
}

func (u *upstream) unpark(i uint64) upAnswer {
	a := u.parked[i]
	u.parked[i] = upAnswer{}
	u.free = append(u.free, i)
	return a
}

// finish accounts the last windows into r.
func (u *upstream) finish(r *Result) {
	for i := range u.keys {
		u.flush(&u.keys[i])
		u.keys[i].win = -1
	}
	r.UpstreamAccepted, r.Upstream429, r.UpstreamFailed = u.accepted, u.refused429, u.failed
	r.UpstreamPauseEvents, r.Upstream429WorstIsolate = u.events, u.worst
	if u.utilDen > 0 {
		r.UpstreamUtilisation = 100 * float64(u.utilNum) / float64(u.utilDen)
	}
}

// sendUpstream sends an admitted request of key gid from isolate iso to
// the upstream at now; with feedback, its answer goes back to the isolate
// (at once, or after the upstream's latency).
func (e *engine) sendUpstream(iso int, gid int32, cost, now int64) error {
	status, h := e.up.answer(gid, iso, now, cost)
	if !e.feedback {
		return nil
	}
	nd := e.nodes[iso]
	if lat := int64(e.up.cfg.Latency); lat > 0 {
		i := e.up.park(upAnswer{gid: gid, status: status, headers: h})
		e.heap.push(event{t: now + lat, tok: i, node: int32(iso), gen: nd.gen, kind: evUpstream})
		return nil
	}
	return e.observe(nd, upAnswer{gid: gid, status: status, headers: h}, now)
}

// observe gives an upstream answer to nd's isolate at now and syncs early
// when the module asks (the fleet should hear of a pause at once).
func (e *engine) observe(nd *node, a upAnswer, now int64) error {
	k := &e.keys[a.gid]
	o, err := nd.iso.Observe(e.ctx, e.cfg.Limiters[k.lim].Name, k.name, a.status, a.headers, false, now)
	if err != nil {
		return fmt.Errorf("sim: observe: %w", err)
	}
	if o.Sync {
		return e.want(nd, now)
	}
	return nil
}
