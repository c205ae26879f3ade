package sim

import (
	"context"
	"errors"
	"fmt"
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/edgelimit/edgelimit/coordinator/merge"
	"github.com/edgelimit/edgelimit/edge/failpolicy"
	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// node is one real isolate the strategy decides with: an edge isolate
// (local-only, approximate, strict), a location's counter (location) or
// the central counter (central).
type node struct {
	iso      *isolate.Isolate
	sched    *syncloop.Scheduler
	index    int // isolate or location index
	loc      int // location of an edge isolate; the location of a location counter
	gen      int32
	timer    uint64 // token of the live timer event
	attempt  uint64 // token of the last attempt started
	batchTok uint64 // token of the batch's live attempt
	out      []byte // outstanding batch
	reply    []byte // reply of the live attempt
	// The amendments in flight (wire/amend.go); their replies are taken
	// as well as the batch's, and an amendment's while the next batch is
	// in flight too.
	amends  []amendment
	batchN  int64 // batches cut by the isolate (amendment.batch); a resend is no new cut
	applied int64 // highest seq the coordinator applied (for writes)
	sentAt  int64 // when the live attempt was sent, ns
	share   *failpolicy.Share[int32]
	// waiting holds the requests held for a sync (SyncRetry answers), in
	// the order they were held, which is their deadlines' (each is held
	// at the simulated time for the engine's one RetryPolicy.MaxWait;
	// settle and expire only drop requests): expire relies on it.
	waiting []waiter
	dead    bool // killed and not restarted yet (see Kill); iso is nil
	// What the timer armed last starts when it fires, when an early
	// sync moved it forward (causeRegular: the interval's own timer).
	timerCause syncCause
	// unanswered: the module's outstanding batch was sent and no reply to
	// it applied (the batch's or an amendment's): its next SyncOut sends
	// it again, asking for nothing new.
	unanswered bool
	// tail: in requests mode (Scenario.Background), until when (ns) the
	// sync after the last request may still start (0 or past: none).
	tail int64
}

// waiter is a request the module answered with SyncRetry (a strict lease
// miss, a read-through cold key), held for syncs as the edge host holds
// it (syncloop.Retry) and decided again after each reply.
type amendment struct {
	tok        uint64 // its attempt's token
	at         int64  // when it was sent, ns
	batch      int64  // the batch it amends (node.batchN then)
	out, reply []byte
}

type waiter struct {
	t, cost int64
	gid     int32
	lim     int
	r       syncloop.Retry
	// The attempts that ask for it (syncloop.NextAsk): the batch cut
	// after it was held (node.batchN then; 0: none), the amendment its
	// hold sent (its token; 0: none).
	batch int64
	amend uint64
}

type keyInfo struct {
	name   string
	lim    int
	cap    int64 // admissible cost per window
	period int64
	// sliding: a sliding window, whose overrun is measured on its
	// weighted count (truth.slideOver)
	sliding bool
	// perUnit and tol (buckets): the time one unit takes to refill and
	// the burst's, ns; 0 for windows (truth.bucket)
	perUnit, tol int64
	// central strategy: bytes of a one-request batch and its reply
	batchBytes, replyBytes int64
}

type truth struct {
	win, offered, admitted, denied int64
	// prevAdmitted is what the window before win admitted (0 when no
	// request came in it), and slideOver, for a sliding window, the most
	// its weighted count passed the limit at an admission in win: the
	// cost admitted in win so far plus prevAdmitted weighted by the share
	// of the previous window the sliding window still covered then
	// (rounded down, as the module weighs it). A sliding limiter promises
	// that count, not just each fixed window's: 100 admitted at the end
	// of one window and 100 at the start of the next keep every fixed
	// window at a limit of 100 and pass the sliding one by nearly 100.
	prevAdmitted, slideOver int64
	// bucket (token bucket, GCRA): what one exact bucket deciding every
	// request as it came would have admitted in the window (the mark the
	// others' utilisation is measured against: a window after a burst
	// has less than the limit to give), and the most the cost admitted
	// passed the bucket's burst in it (units)
	bucket bucketTruth
	// spent is what the coordinator had counted or reserved for the
	// window when it ended (see sampleWindowEnd); -1 when not sampled.
	spent int64
	// exact (windowed keys) is what one exact counter deciding every
	// request offered in the window, in order, would have admitted
	// (exactwindow.go).
	exact int64
}

// engine runs one (strategy, sync interval) of a scenario.
type engine struct {
	ctx      context.Context
	sc       *Scenario
	cfg      wire.Config
	strategy string
	strat    strategy
	interval int64
	seed     uint64
	rt       *isolate.Runtime
	strand   float64 // the coordinator's StrandBudget (Simulator.StrandBudget)
	// isosPerKey is the coordinator's MaxIsolatesPerKey
	// (Simulator.MaxIsolatesPerKey; 0: its default)
	isosPerKey int

	coord *merger

	nodes   []*node
	heap    evHeap
	sources []*source
	keys    []keyInfo
	truth   []truth
	net     *network
	churn   *rand.Rand
	hist    histogram
	remErr  remainingErr // remaining.go
	res     Result

	duration, lifetime  int64
	policies            []failpolicy.Policy // per limiter
	retry               syncloop.RetryPolicy
	isolates, locations int
	progress            func(float64)
	scratch             []byte
	outBuf              []byte // scratch of startSync and amend
	liveBuf             []int  // scratch of live
	expireSeen          int64  // held requests expire looked at (the work a test counts)
	utilNum, utilDen    int64
	overs               []float64 // overrun % of each key-window over its capacity
	up                  *upstream // the upstream model, when the scenario has one
	feedback            bool      // the isolates observe the upstream's answers
	timeline            bool      // record Result.Timeline (timeline.go)
	requestsMode        bool      // isolates sync only around requests (Scenario.Background)
}

func (e *engine) setup() error {
	sc := e.sc
	e.isolates, e.locations = sc.Isolates, sc.Locations
	e.duration, e.lifetime = int64(sc.Duration), int64(sc.Churn.Lifetime)
	st, err := strategyFor(e.strategy)
	if err != nil {
		return err
	}
	e.strat = st
	ed, ok := st.(edge)
	byLocation := ok && ed.byLocation
	e.net = newNetwork(sc, e.seed, byLocation)
	// Location counters are servers: their timers run.
	e.requestsMode = sc.Background == BackgroundRequests && st.syncs() && !byLocation
	e.retry = syncloop.RetryPolicy{MaxWait: time.Duration(sc.RetryWait)}
	e.churn = rand.New(rand.NewPCG(e.seed, 0xc4a2))
	e.res = Result{Scenario: sc.Name, Strategy: e.strategy, Sync: Duration(e.interval), Isolates: sc.Isolates,
		Duration: sc.Duration, Seed: e.seed}

	// The limiters, with the strategy's mode.
	e.cfg = sc.cfg
	e.cfg.Limiters = append([]wire.LimiterConfig(nil), sc.cfg.Limiters...)
	def, err := failpolicy.Parse(sc.FailPolicy)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	for i := range e.cfg.Limiters {
		l := &e.cfg.Limiters[i]
		l.Mode = st.mode()
		// Read-through is edgelimit approximate mode's, with a host
		// that holds the request for the sync; the others decide at once.
		l.ReadThrough = l.ReadThrough && st.early() && l.Mode == wire.Approximate
		e.policies = append(e.policies, failpolicy.For(l, def))
	}

	// Keys and traffic sources.
	ids := map[string]int32{}
	intern := func(lim int, name string) int32 {
		k := strconv.Itoa(lim) + "\x00" + name
		if g, ok := ids[k]; ok {
			return g
		}
		l := &e.cfg.Limiters[lim]
		lc := l.LimitFor(name)
		capacity := lc
		if l.IsBucket() {
			capacity = lc + l.EffectiveBurst(lc)
		}
		g := int32(len(e.keys))
		ki := keyInfo{name: name, lim: lim, cap: capacity, period: l.Period, sliding: l.Algorithm == wire.SlidingWindow}
		if l.IsBucket() {
			ki.perUnit = max(l.Period/lc, 1)
			ki.tol = limitmath.MulDiv(l.EffectiveBurst(lc), l.Period, lc)
		}
		if _, ok := st.(central); ok {
			b := wire.Batch{Version: wire.Version, Isolate: "central-0", Seq: 1 << 20, At: 1 << 50,
				Entries: []wire.Delta{{Limiter: l.Name, Key: name, Window: 1 << 30, Delta: 1, Demand: 1}}}
			r := wire.Reply{Version: wire.Version, Seq: 1 << 20, At: 1 << 50,
				Entries: []wire.View{{Limiter: l.Name, Key: name, Window: 1 << 30, Count: lc, Lease: -1, Isolates: 1}}}
			ki.batchBytes, ki.replyBytes = int64(len(b.AppendMsg(nil))), int64(len(r.AppendMsg(nil)))
		}
		ids[k] = g
		e.keys = append(e.keys, ki)
		return g
	}
	limIndex := func(name string) int {
		for i := range e.cfg.Limiters {
			if e.cfg.Limiters[i].Name == name {
				return i
			}
		}
		return -1
	}
	for i := range sc.Traffic {
		t := &sc.Traffic[i]
		li := limIndex(t.Limiter)
		gids := make([]int32, t.Keys.Count)
		for k := range gids {
			gids[k] = intern(li, keyName(t.Keys.Prefix, k))
		}
		e.sources = append(e.sources, newSource(t, li, gids, e.seed, i, e.duration))
	}
	if len(sc.trace) > 0 {
		s := &source{rng: rand.New(rand.NewPCG(e.seed, 0x7ace)), trace: sc.trace, next: sc.trace[0].t}
		s.traceGids = make([]int32, len(sc.trace))
		s.traceLims = make([]int, len(sc.trace))
		for i, ev := range sc.trace {
			li := limIndex(ev.limiter)
			s.traceLims[i], s.traceGids[i] = li, intern(li, ev.key)
		}
		e.sources = append(e.sources, s)
	}
	if len(sc.counts) > 0 {
		li := limIndex(sc.TraceLimiter)
		k := sc.TraceKeys
		s := &source{rng: rand.New(rand.NewPCG(e.seed, 0xc0a7)), lim: li, cost: 1, dist: k.Dist[0],
			counts: &countsSource{counts: sc.counts, bin: int64(sc.TraceBin), scale: sc.TraceScale}}
		s.gids = make([]int32, k.Count)
		for i := range s.gids {
			s.gids[i] = intern(li, keyName(k.Prefix, i))
		}
		if s.dist == 'z' {
			s.zipf = rand.NewZipf(s.rng, k.S, 1, uint64(k.Count-1))
		}
		s.next = never
		if s.counts.fill(s.rng) {
			s.next, s.counts.times = s.counts.times[0], s.counts.times[1:]
		}
		e.sources = append(e.sources, s)
	}
	if sc.Upstream != nil {
		e.up = newUpstream(sc.Upstream, len(e.keys))
		e.feedback = ok && ed.feedback && !ed.byLocation
	}
	e.truth = make([]truth, len(e.keys))
	for i := range e.truth {
		e.truth[i].win = -1
	}

	// The coordinator, on virtual time.
	if st.syncs() {
		c, err := newMerger(e.cfg, merge.MergerOptions{StrandBudget: e.strand, MaxIsolatesPerKey: e.isosPerKey})
		if err != nil {
			return err
		}
		e.coord = c
	}

	// The nodes.
	n := st.nodes(e.isolates, e.locations)
	for i := 0; i < n; i++ {
		nd := &node{index: i, loc: i % e.locations}
		if byLocation {
			nd.loc = i
		}
		if err := e.start(nd, 0); err != nil {
			return err
		}
		e.nodes = append(e.nodes, nd)
		if e.churns() {
			e.scheduleEvict(nd, 0)
		}
	}
	e.scheduleKills()
	if e.timeline {
		e.startTimeline()
	}
	return nil
}

// churns reports whether the strategy's nodes are evicted (Churn): the
// isolates of local-only and of edgelimit's strategies.
func (e *engine) churns() bool {
	_, ok := e.strat.(localOnly)
	return e.lifetime > 0 && (ok || e.strat.early())
}

// stop ends nd's isolate at now, as a kill -9 or an eviction does: the
// requests it holds are denied, its unsynced and in-flight deltas are lost
// (its events are stale from now on).
func (e *engine) stop(nd *node, now int64) error {
	e.expire(nd, now, true)
	err := nd.iso.Close(e.ctx)
	nd.iso = nil
	nd.gen++
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}

// restart starts a new incarnation of nd at now (cold, a new id).
func (e *engine) restart(nd *node, now int64) error {
	nd.dead = false
	if err := e.start(nd, now); err != nil {
		return err
	}
	if e.churns() {
		e.scheduleEvict(nd, now)
	}
	return nil
}

// start (re)creates nd's isolate at now, cold, with a new id.
func (e *engine) start(nd *node, now int64) error {
	cfg := e.cfg
	cfg.IsolateID = e.strategy + "-" + strconv.Itoa(nd.index) + "-" + strconv.Itoa(int(nd.gen))
	cfg.SyncInterval = min(max(e.interval, wire.MinSyncInterval), wire.MaxSyncInterval)
	seed := e.seed*1_000_003 + uint64(nd.index)*7919 + uint64(nd.gen)
	iso, err := e.rt.NewIsolate(e.ctx, cfg, seed)
	if err != nil {
		return fmt.Errorf("sim: isolate: %w", err)
	}
	nd.iso, nd.applied, nd.amends, nd.unanswered, nd.tail = iso, 0, nd.amends[:0], false, 0
	// The fail policy's local shares, for every key this node may see.
	nd.share = failpolicy.NewShare[int32](max(len(e.keys)*max(e.isolates, 1), 1))
	nd.attempt++
	nd.batchTok = nd.attempt
	if e.strat.syncs() {
		o := syncloop.Options{Interval: time.Duration(e.interval), Jitter: e.sc.SyncJitter,
			MinSpacing: time.Duration(e.sc.EarlySpacing), BackoffBase: time.Duration(e.interval),
			BackoffMax: max(time.Duration(e.interval)*32, 30*time.Second)}
		if !e.strat.early() {
			o.MinSpacing = -1
		}
		nd.timerCause = causeRegular
		if nd.sched == nil {
			s, err := syncloop.New(o, now, seed)
			if err != nil {
				return fmt.Errorf("sim: %w", err)
			}
			nd.sched = s
		} else {
			nd.sched.Reset(now)
		}
		e.armTimer(nd)
	}
	return nil
}

func (e *engine) scheduleEvict(nd *node, now int64) {
	life := int64(e.churn.ExpFloat64() * float64(e.lifetime))
	e.heap.push(event{t: now + max(life, 1), node: int32(nd.index), gen: nd.gen, kind: evEvict})
}

func (e *engine) armTimer(nd *node) {
	t := nd.sched.Next()
	if t == syncloop.Never {
		return
	}
	nd.timer++
	e.heap.push(event{t: t, tok: nd.timer, node: int32(nd.index), gen: nd.gen, kind: evTimer})
}

func (e *engine) close() {
	for _, nd := range e.nodes {
		if nd.iso != nil {
			nd.iso.Close(e.ctx)
		}
	}
	if e.coord != nil {
		e.coord.Close()
	}
}

// run simulates the scenario and fills e.res.
func (e *engine) run() error {
	var nreq, nev int64
	nextProgress := int64(1 << 16)
	for {
		// The next request of any source.
		var src *source
		t := int64(never)
		for _, s := range e.sources {
			if s.next < t {
				src, t = s, s.next
			}
		}
		if t >= e.duration {
			t = e.duration
		}
		for e.heap.top() <= t && e.heap.top() < e.duration {
			if err := e.handle(e.heap.pop()); err != nil {
				return err
			}
			// Events between two requests can be many (a long quiet
			// spell of sync ticks): the run stops within 2^10 events of
			// a cancellation too, not only of requests.
			if nev++; nev&(1<<10-1) == 0 {
				if err := e.ctx.Err(); err != nil {
					return fmt.Errorf("sim: %w", err)
				}
			}
		}
		if src == nil || t >= e.duration {
			break
		}
		isoIdx, gid, lim, cost := src.pick(e.isolates, e.locations)
		if err := e.request(t, isoIdx, gid, lim, cost); err != nil {
			return err
		}
		nreq++
		if nreq >= nextProgress {
			nextProgress += 1 << 16
			if e.progress != nil {
				e.progress(float64(t) / float64(e.duration))
			}
		}
		if nreq&(1<<10-1) == 0 {
			if err := e.ctx.Err(); err != nil {
				return fmt.Errorf("sim: %w", err)
			}
		}
	}
	e.finish()
	return nil
}

// request decides one request at now and records it (unless it is held
// for a sync: then settle or expire records it).
func (e *engine) request(now int64, isoIdx int, gid int32, lim int, cost int64) error {
	e.rollWindow(gid, now)
	if k := &e.keys[gid]; k.perUnit > 0 {
		e.truth[gid].bucket.offer(k, now, cost)
	}
	e.res.Requests++
	if e.up != nil {
		e.up.arrive(gid, now, cost)
	}
	isoIdx, ok := e.live(isoIdx)
	if !ok { // every isolate is dead: nothing answers
		e.record(gid, now, cost, false, 0)
		return nil
	}
	allowed, added, held, err := e.strat.decide(e, now, isoIdx, gid, lim, cost)
	if err == nil && e.requestsMode {
		err = e.pump(e.nodes[isoIdx], now)
	}
	if err != nil || held {
		return err
	}
	e.record(gid, now, cost, allowed, added)
	if allowed && e.up != nil {
		return e.sendUpstream(isoIdx, gid, cost, now+added)
	}
	return nil
}

// pump is what a request does to the syncs of its isolate nd at now in
// requests mode (Scenario.Background), as the JavaScript package's on
// Workers: the sync starts now if it is due (the interval passed, the
// module asked earlier, or a failing isolate's backoff or probe allows
// one); otherwise the request leaves a tail that takes the next sync
// due within three intervals (while the syncs do not fail), one sync,
// as ctx.waitUntil keeps the request's own work alive after its answer.
func (e *engine) pump(nd *node, now int64) error {
	if !nd.sched.InFlight() && (nd.sched.Due(now) || nd.sched.Probe(now)) {
		nd.tail = 0
		c := causeRegular
		if nd.sched.Failures() > 0 {
			c = causeRetry
		}
		return e.startSync(nd, now, c)
	}
	if nd.tail < now && nd.sched.Failures() == 0 {
		nd.tail = now + 3*e.interval
		if !nd.sched.InFlight() {
			e.armTimer(nd) // the timer an earlier tail's end let lapse
		}
	}
	return nil
}

// quota is the fail policy's view of key gid's limit.
func (e *engine) quota(gid int32) failpolicy.Quota {
	k := &e.keys[gid]
	return failpolicy.Quota{Limit: k.cap, Period: k.period, Isolates: int64(e.isolates)}
}

// want asks for an early sync of nd at now, as the edge host's loop does
// when kicked: at once if the scheduler allows it, else at the earliest
// time it does.
func (e *engine) want(nd *node, now int64) error { return e.wantFor(nd, now, causeEarly) }

// wantFor is want for a sync of cause c (causeEarly: the module asked;
// causeHeld: a held request asks, syncloop.NextAsk).
func (e *engine) wantFor(nd *node, now int64, c syncCause) error {
	before := nd.sched.Next()
	if nd.sched.Want(now) {
		return e.startSync(nd, now, c)
	}
	if nd.sched.Next() < before {
		nd.timerCause = c
		e.armTimer(nd)
	}
	return nil
}

// record accounts a request of key gid decided at now in the current
// window. The request is offered in the window it is decided in, as it is
// admitted or denied there: one held for a sync at a window's end and
// decided in the next was offered in the first and admitted in the
// second, and a window with no request of its own but such an admission
// was not accounted at all (flush): a key at 1% of its limit over 64
// isolates, whose requests nearly all waited, read 98.0% utilisation with
// none denied, and such a window's admissions escaped the overrun check.
func (e *engine) record(gid int32, now, cost int64, allowed bool, added int64) {
	tr := &e.truth[gid]
	tr.offered += cost
	tr.offerExact(&e.keys[gid], cost)
	e.hist.add(added)
	if added > 0 {
		e.res.Waited++
		if !allowed {
			e.res.WaitedDenied++
		}
	}
	if allowed {
		e.res.Admitted += cost
		tr.admitted += cost
		if k := &e.keys[gid]; k.perUnit > 0 {
			tr.bucket.admit(k, now, cost)
		} else if k.sliding {
			weighted := tr.admitted + limitmath.MulDiv(tr.prevAdmitted, k.period-(now-tr.win*k.period), k.period)
			tr.slideOver = max(tr.slideOver, weighted-k.cap)
		}
	} else {
		e.res.Denied += cost
		tr.denied += cost
	}
}

// rollWindow moves key gid's truth to the window of now.
func (e *engine) rollWindow(gid int32, now int64) {
	tr := &e.truth[gid]
	if w := now / e.keys[gid].period; w != tr.win {
		e.flush(gid)
		prev := int64(0)
		if w == tr.win+1 {
			prev = tr.admitted
		}
		tr.win, tr.offered, tr.admitted, tr.denied, tr.spent, tr.exact = w, 0, 0, 0, -1, 0
		tr.prevAdmitted, tr.slideOver = prev, 0
		tr.bucket.roll()
		e.scheduleWindowEnd(gid, w)
	}
}

// settle decides again, at now, the requests nd holds after an applied
// reply: each is admitted, denied, or (SyncRetry again, within its
// syncloop.Retry) held for another reply. A second reply to the same batch
// (second: its amendment's, or the batch's after the amendment's) does not
// count as another reply: it answers the same demand.
func (e *engine) settle(nd *node, now int64, second bool) error {
	keep := nd.waiting[:0]
	for _, w := range nd.waiting {
		e.rollWindow(w.gid, now)
		if second && now > w.r.Deadline() || !second && !w.r.Replied(now) {
			e.record(w.gid, now, w.cost, false, now-w.t)
			continue
		}
		w.r.NewWindow(now)
		d, err := nd.iso.Decide(e.ctx, w.lim, e.keys[w.gid].name, w.cost, now)
		if err != nil {
			return fmt.Errorf("sim: decide: %w", err)
		}
		if d.SyncRetry && w.r.Again() {
			w.r.Decided(d.Reset, now)
			keep = append(keep, w)
			continue
		}
		if d.SyncRetry {
			// Denied for good: its ask must not ask for a lease.
			if err := nd.iso.Withdraw(e.ctx); err != nil {
				return fmt.Errorf("sim: withdraw: %w", err)
			}
		}
		if d.Allowed {
			e.noteRemaining(w.gid, w.cost, d.Remaining, now)
		}
		e.record(w.gid, now, w.cost, d.Allowed, now-w.t)
		if d.Allowed && e.up != nil {
			if err := e.sendUpstream(nd.index, w.gid, w.cost, now); err != nil {
				return err
			}
		}
	}
	nd.waiting = keep
	return e.ask(nd, now)
}

// asked reports whether an attempt of nd in flight asks for w: the batch
// cut after w was held, or the amendment w's hold sent.
func (nd *node) asked(w *waiter) bool {
	if w.batch == nd.batchN && nd.sched.InFlight() {
		return true
	}
	for i := range nd.amends {
		if w.amend != 0 && nd.amends[i].tok == w.amend {
			return true
		}
	}
	return false
}

// lastAmends returns how many amendments of nd's last batch (in flight
// or answered) are on their way.
func (nd *node) lastAmends() int {
	n := 0
	for _, a := range nd.amends {
		if a.batch == nd.batchN {
			n++
		}
	}
	return n
}

// ask makes, at now, an attempt of nd ask for the requests it holds that
// no attempt in flight asks for, as the edge host does
// (syncloop.NextAsk): an amendment of the batch in flight, or the next
// batch; else they wait for a reply.
func (e *engine) ask(nd *node, now int64) error {
	unasked := false
	// Newest first: the request just held is the likeliest unasked, and
	// a scan from the oldest made many held requests cost their square
	// (2,000,000 requests at 10^7/s took 54 s, and 10^8/s stopped 2 min
	// after an interrupt).
	for i := len(nd.waiting) - 1; i >= 0; i-- {
		if !nd.asked(&nd.waiting[i]) {
			unasked = true
			break
		}
	}
	if !unasked {
		return nil
	}
	switch syncloop.NextAsk(nd.sched.InFlight(), nd.lastAmends()) {
	case syncloop.AskAmend:
		return e.amend(nd, now)
	case syncloop.AskBatch:
		return e.wantFor(nd, now, causeHeld)
	}
	return nil
}

// expire denies, at now, the requests nd holds whose deadline has passed
// (all of them when the isolate is gone). nd.waiting is in deadline order
// (node.waiting), so they are a prefix of it: expire stops at the first
// request still within its deadline and drops the prefix. It scanned and
// rebuilt the whole list at each held request's deadline: a counts trace
// of two bins of 4e6 requests (8 isolates, a limit of 100/s) ran 56 s,
// 73% of it here (10 s now).
func (e *engine) expire(nd *node, now int64, all bool) {
	n := 0
	for _, w := range nd.waiting {
		if !all && w.r.Deadline() > now {
			break
		}
		e.expireSeen++
		e.rollWindow(w.gid, now)
		e.record(w.gid, now, w.cost, false, now-w.t)
		n++
	}
	e.expireSeen++ // the request that stopped the scan, or the end
	if n == len(nd.waiting) {
		nd.waiting = nd.waiting[:0]
		return
	}
	nd.waiting = nd.waiting[n:]
}

// startSync begins a sync attempt of nd at now, started by cause c.
func (e *engine) startSync(nd *node, now int64, c syncCause) error {
	nd.timerCause = causeRegular // a timer armed from here on is the interval's (or the backoff's)
	out, err := nd.iso.SyncOut(e.ctx, now, e.outBuf[:0])
	if err != nil {
		return fmt.Errorf("sim: sync out: %w", err)
	}
	e.outBuf = out
	if len(out) == 0 { // nd.out stays what its last attempt sent (it may still arrive)
		nd.sched.Idle(now)
		e.armTimer(nd)
		return nil
	}
	nd.out = append(nd.out[:0], out...)
	e.res.SyncCauses.count(c)
	nd.sched.Begin(now)
	resend := nd.unanswered
	nd.unanswered = true
	if !resend {
		// A new cut. The module takes the reply of the last batch's
		// amendment while this one is in flight; those of earlier
		// batches it refuses.
		keep := nd.amends[:0]
		for _, a := range nd.amends {
			if a.batch == nd.batchN {
				keep = append(keep, a)
			}
		}
		nd.amends = keep
		nd.batchN++
	}
	e.send(nd, now, nil)
	nd.batchTok = nd.attempt
	if !resend { // a new cut asks for every request held; a resend for none since its cut (the edge host's cuts)
		for i := range nd.waiting {
			nd.waiting[i].batch = nd.batchN
		}
	}
	return nil
}

// amend sends, at now, an amendment of nd's batch in flight asking for
// the requests it held since the batch was cut (wire/amend.go), as the
// edge host does; its reply is taken as well as the batch's. The requests
// no attempt asked for are asked for by it. With nothing new to ask the
// held requests wait for a reply.
func (e *engine) amend(nd *node, now int64) error {
	out, err := nd.iso.Amend(e.ctx, now, e.outBuf[:0])
	if err != nil {
		return fmt.Errorf("sim: amend: %w", err)
	}
	e.outBuf = out
	if len(out) == 0 {
		return nil
	}
	e.res.Amendments++
	for i := range nd.waiting {
		if w := &nd.waiting[i]; !nd.asked(w) {
			w.amend = nd.attempt + 1 // the token send gives it
		}
	}
	nd.amends = append(nd.amends, amendment{at: now, batch: nd.batchN, out: append([]byte(nil), out...)})
	e.send(nd, now, &nd.amends[len(nd.amends)-1])
	return nil
}

// send starts an attempt at now: of nd's batch (nd.out), or of the
// amendment a.
func (e *engine) send(nd *node, now int64, a *amendment) {
	nd.attempt++
	out := nd.out
	if a != nil {
		out, a.tok = a.out, nd.attempt
	} else {
		nd.sentAt = now
	}
	e.res.SyncRequests++
	e.res.SyncBytes += int64(len(out))
	ev := event{tok: nd.attempt, node: int32(nd.index), gen: nd.gen}
	d, ok := e.net.leg(nd.index, nd.loc, now)
	if !ok || d > e.net.timeout {
		ev.t, ev.kind = now+e.net.timeout, evTimeout
		e.heap.push(ev)
		return
	}
	ev.t, ev.kind = now+d, evArrive
	e.heap.push(ev)
}

// live reports which live attempt of nd token tok is: the batch's
// (batch), an amendment's (its index in nd.amends, else -1), or neither (a
// stale attempt).
func (nd *node) live(tok uint64) (batch bool, amendment int) {
	for i := range nd.amends {
		if nd.amends[i].tok == tok {
			return false, i
		}
	}
	return tok == nd.batchTok, -1
}

// handle runs one event.
func (e *engine) handle(ev event) error {
	nd := e.nodes[ev.node]
	now := ev.t
	switch ev.kind {
	case evTimer:
		if ev.gen != nd.gen || ev.tok != nd.timer || nd.sched.InFlight() {
			return nil
		}
		if e.requestsMode {
			// Only a request's tail or a held request syncs (pump).
			if len(nd.waiting) == 0 && (now > nd.tail || nd.sched.Failures() > 0) {
				nd.tail = 0
				return nil
			}
			nd.tail = 0
		}
		c := nd.timerCause
		if nd.sched.Failures() > 0 {
			c = causeRetry
		}
		return e.startSync(nd, now, c)
	case evArrive:
		if ev.gen != nd.gen {
			return nil // the isolate was evicted: its batch dies with it
		}
		batch, ai := nd.live(ev.tok)
		sent := nd.out
		if ai >= 0 {
			sent = nd.amends[ai].out
		}
		var b wire.Batch
		if err := b.UnmarshalMsg(sent); err != nil {
			return fmt.Errorf("sim: batch: %w", err)
		}
		reply, err := e.coord.sync(&b, now)
		back := event{tok: ev.tok, node: ev.node, gen: ev.gen}
		giveUp := max(nd.sentAt+e.net.timeout, now) // the isolate's timeout
		if ai >= 0 {
			giveUp = max(nd.amends[ai].at+e.net.timeout, now)
		}
		if err != nil {
			if errors.Is(err, merge.ErrSequence) && ai < 0 {
				// As the edge host does on a 409: a new incarnation
				// resends the same deltas as its batch 1.
				if rerr := nd.iso.Reincarnate(e.ctx); rerr != nil {
					return fmt.Errorf("sim: %w", rerr)
				}
				nd.amends = nd.amends[:0] // its amendments are void
			}
			back.t, back.kind = giveUp, evTimeout // refused: the isolate retries
			e.heap.push(back)
			return nil
		}
		if b.Seq > nd.applied {
			nd.applied = b.Seq
			e.res.CoordWrites++
		}
		if !batch && ai < 0 {
			return nil // a stale attempt: its reply is ignored
		}
		e.scratch = reply.AppendMsg(e.scratch[:0])
		e.res.SyncBytes += int64(len(e.scratch))
		d, ok := e.net.leg(nd.index, nd.loc, now)
		if !ok || now+d > giveUp {
			// Lost or late on the way back: the isolate times out (the
			// batch was applied; the retry is answered as a duplicate).
			back.t, back.kind = giveUp, evTimeout
			e.heap.push(back)
			return nil
		}
		if ai >= 0 {
			nd.amends[ai].reply = append(nd.amends[ai].reply[:0], e.scratch...)
		} else {
			nd.reply = append(nd.reply[:0], e.scratch...)
		}
		back.t, back.kind = now+d, evReply
		e.heap.push(back)
	case evReply:
		batch, ai := nd.live(ev.tok)
		if ev.gen != nd.gen || !batch && ai < 0 {
			return nil
		}
		// The first reply of the batch (its own or its amendment's) ends
		// the sync; the other brings its views too (the module refuses
		// it once the batch after the next is cut, or the next one's
		// reply is applied). An amendment's reply is the first also
		// after the batch's attempt timed out (the module takes it as
		// the batch's, as the edge host does: host.applyReply).
		rep, first := nd.reply, nd.sched.InFlight()
		if ai >= 0 {
			rep, first = nd.amends[ai].reply, nd.unanswered && nd.amends[ai].batch == nd.batchN
			nd.amends = append(nd.amends[:ai], nd.amends[ai+1:]...)
		}
		err := nd.iso.SyncIn(e.ctx, rep, now)
		switch {
		case !first:
		case err != nil:
			e.res.SyncFailures++
			nd.sched.Failure(now)
		default:
			nd.unanswered = false
			nd.sched.Success(now)
			nd.timerCause = causeRegular
		}
		switch {
		case err == nil:
			if serr := e.settle(nd, now, !first); serr != nil {
				return serr
			}
		case !first:
			// A second reply the module refused (a batch was cut
			// since, or its reply came): the requests waiting for it
			// ask again.
			if werr := e.ask(nd, now); werr != nil {
				return werr
			}
		}
		e.armTimer(nd)
	case evDeadline:
		if ev.gen == nd.gen {
			e.expire(nd, now, false)
		}
	case evWindowEnd:
		if g := int32(ev.tok); e.truth[g].win == ev.t/e.keys[g].period {
			e.sampleWindowEnd(g, now)
		}
	case evUpstream:
		a := e.up.unpark(ev.tok)
		if ev.gen == nd.gen { // else the isolate that sent it is gone
			return e.observe(nd, a, now)
		}
	case evTimeout:
		batch, ai := nd.live(ev.tok)
		if ev.gen != nd.gen {
			return nil
		}
		if ai >= 0 {
			// The amendment is lost: its requests ask again.
			nd.amends = append(nd.amends[:ai], nd.amends[ai+1:]...)
			return e.ask(nd, now)
		}
		if ev.gen != nd.gen || !batch || !nd.sched.InFlight() {
			return nil
		}
		e.res.SyncFailures++
		nd.sched.Failure(now)
		e.armTimer(nd)
	case evEvict:
		if ev.gen != nd.gen {
			return nil
		}
		e.res.Evictions++
		if err := e.stop(nd, now); err != nil { // the isolate and its held requests are gone
			return err
		}
		return e.restart(nd, now)
	case evKill:
		return e.kill(nd, now, e.sc.Kills[ev.tok])
	case evRestart:
		if ev.gen == nd.gen && nd.dead {
			return e.restart(nd, now)
		}
	}
	return nil
}

// flush accounts the finished window of key gid.
func (e *engine) flush(gid int32) {
	tr := &e.truth[gid]
	if tr.win < 0 || tr.offered == 0 {
		return
	}
	e.recordWindow(gid, tr)
	k := &e.keys[gid]
	r := &e.res
	r.Windows++
	r.Capacity += k.cap
	r.Offered += tr.offered
	bound := tr.bound(k) // what the window could admit
	over := max(tr.admitted-k.cap, tr.slideOver)
	if k.perUnit > 0 {
		over = tr.bucket.over
	}
	if over > 0 {
		pct := 100 * float64(over) / float64(k.cap)
		r.Overrun += over
		r.OverWindows++
		r.WorstOverrun = max(r.WorstOverrun, over)
		r.WorstOverrunPct = math.Max(r.WorstOverrunPct, pct)
		e.overs = append(e.overs, pct)
	}
	unserved := min(tr.denied, max(bound-tr.admitted, 0))
	r.Unserved += unserved
	if tr.spent >= 0 {
		// Part of the unserved demand: the coordinator can count more
		// than the room (it charges reclaimed lease entries as spent,
		// coordinator/merge/reclaim.go), and stranded read 24.30%
		// against 10.45% unserved over 500 isolates.
		r.Stranded += min(unserved, max(tr.spent-tr.admitted, 0))
	}
	e.utilNum += tr.admitted
	e.utilDen += bound
}

func (e *engine) finish() {
	for _, nd := range e.nodes {
		// Still held when the run ends: not answered within it, counted
		// in no window (denied there, each read as unserved in a window
		// with room: under-0.5x 0.08%, where its requests all pass).
		nd.waiting = nd.waiting[:0]
	}
	for g := range e.truth {
		if e.truth[g].win >= 0 && e.truth[g].spent < 0 {
			e.sampleWindowEnd(int32(g), e.duration) // a window the run's end cut short
		}
		e.flush(int32(g))
		e.truth[g].win = -1
	}
	r := &e.res
	for _, s := range e.sources {
		r.TraceNotReplayed += s.left()
	}
	if e.up != nil {
		e.up.finish(r)
	}
	secs := float64(e.duration) / 1e9
	if r.Capacity > 0 {
		r.OverrunPct = 100 * float64(r.Overrun) / float64(r.Capacity)
	}
	if r.Windows > 0 {
		r.OverWindowsPct = 100 * float64(r.OverWindows) / float64(r.Windows)
		r.P99OverrunPct = windowQuantile(e.overs, r.Windows, 0.99)
	}
	if e.utilDen > 0 {
		r.UnservedPct = 100 * float64(r.Unserved) / float64(e.utilDen)
		r.StrandedPct = 100 * float64(r.Stranded) / float64(e.utilDen)
	}
	if r.Requests > 0 {
		r.SyncPerDecision = 100 * float64(r.SyncRequests) / float64(r.Requests)
		r.WaitedPct = 100 * float64(r.Waited) / float64(r.Requests)
		r.WaitedDeniedPct = 100 * float64(r.WaitedDenied) / float64(r.Requests)
	}
	switch {
	case e.utilDen > 0:
		r.Utilisation = 100 * float64(e.utilNum) / float64(e.utilDen)
	case r.Offered > 0 && e.utilNum == 0:
		// Nothing offered could fit (every cost above the limit): none
		// admitted is all there was to admit.
		r.Utilisation = 100
	}
	r.SyncPerSec = float64(r.SyncRequests) / secs
	r.SyncBytesPerSec = float64(r.SyncBytes) / secs
	r.CoordWritesPerSec = float64(r.CoordWrites) / secs
	r.WaitP50 = Duration(e.hist.quantile(0.50))
	r.WaitP99 = Duration(e.hist.quantile(0.99))
	r.RemainingErrPct = e.remErr.mean()
	r.RemainingHighP99Pct = e.remErr.quantile(0.99)
}
