package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/edgelimit/edgelimit/edge/isolate"
	"github.com/edgelimit/edgelimit/edge/syncloop"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// node is one real isolate the strategy decides with: an edge isolate
// (local-only, approximate, strict), a location's counter (location) or
// the central counter (central).
type node struct {
	iso     *isolate.Isolate
	sched   *syncloop.Scheduler
	index   int // isolate or location index
	loc     int // location of an edge isolate; the location of a location counter
	gen     int32
	timer   uint64 // token of the live timer event
	attempt uint64 // token of the live attempt
	out     []byte // outstanding batch
	reply   []byte // reply of the live attempt
	applied int64  // highest seq the coordinator applied (for writes)
	share   map[int32]shareCount
	waiting []waiter // strict: requests held for a lease until the next reply
}

// waiter is a strict-mode request that missed its lease: the host syncs
// and decides it again when the reply arrives (one round trip added).
type waiter struct {
	t, cost int64
	gid     int32
	lim     int
	tries   int // replies already waited for
}

// maxLeaseWaits is how many replies a request may wait for: the reply of a
// sync already in flight when it missed was computed without its demand.
const maxLeaseWaits = 2

type shareCount struct{ win, used int64 }

type keyInfo struct {
	name   string
	lim    int
	cap    int64 // admissible cost per window
	period int64
	// central strategy: bytes of a one-request batch and its reply
	batchBytes, replyBytes int64
}

type truth struct {
	win, offered, admitted, denied int64
}

type partition struct {
	iso, loc   int // -1 when not the target kind
	start, end int64
}

// engine runs one (strategy, sync interval) of a scenario.
type engine struct {
	ctx      context.Context
	sc       *Scenario
	cfg      wire.Config
	strategy string
	interval int64
	seed     uint64
	rt       *isolate.Runtime

	coord *merger

	nodes   []*node
	heap    evHeap
	sources []*source
	keys    []keyInfo
	truth   []truth
	lat     latency
	netRng  *rand.Rand
	churn   *rand.Rand
	parts   []partition
	hist    histogram
	res     Result

	duration, timeout, lifetime int64
	syncing, early              bool
	policy                      byte // 'o', 'c', 'l'
	isolates, locations         int
	progress                    func(float64)
	scratch                     []byte
	utilNum, utilDen            int64
	overs                       []float64 // overrun % of each key-window over its capacity
}

func (e *engine) setup() error {
	sc := e.sc
	e.isolates, e.locations = sc.Isolates, sc.Locations
	e.duration, e.timeout, e.lifetime = int64(sc.Duration), int64(sc.Network.Timeout), int64(sc.Churn.Lifetime)
	e.policy = sc.FailPolicy[0]
	if sc.FailPolicy == FailLocalShare {
		e.policy = 'l'
	}
	e.lat = newLatency(&sc.Network)
	e.netRng = rand.New(rand.NewPCG(e.seed, 0x2e7))
	e.churn = rand.New(rand.NewPCG(e.seed, 0xc4a2))
	e.res = Result{Scenario: sc.Name, Strategy: e.strategy, Sync: Duration(e.interval), Isolates: sc.Isolates,
		Duration: sc.Duration, Seed: e.seed}
	for _, p := range sc.Network.Partitions {
		q := partition{iso: -1, loc: -1, start: int64(p.Start), end: int64(p.Start + p.Duration)}
		if p.Isolate != nil {
			q.iso = *p.Isolate
		} else {
			q.loc = *p.Location
		}
		e.parts = append(e.parts, q)
	}

	// The limiters, with the strategy's mode.
	e.cfg = sc.cfg
	e.cfg.Limiters = append([]wire.LimiterConfig(nil), sc.cfg.Limiters...)
	mode := wire.Approximate
	if e.strategy == Strict {
		mode = wire.Strict
	}
	for i := range e.cfg.Limiters {
		e.cfg.Limiters[i].Mode = mode
		// Read-through is edgelimit approximate mode's, with a host
		// that waits for the sync; the other strategies decide at once.
		e.cfg.Limiters[i].ReadThrough = e.cfg.Limiters[i].ReadThrough && e.strategy == Approximate
	}
	e.syncing = e.strategy == Location || e.strategy == Approximate || e.strategy == Strict
	e.early = e.strategy == Approximate || e.strategy == Strict

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
		ki := keyInfo{name: name, lim: lim, cap: capacity, period: l.Period}
		if e.strategy == Central {
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
		e.sources = append(e.sources, newSource(t, li, gids, e.seed, i))
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
	e.truth = make([]truth, len(e.keys))
	for i := range e.truth {
		e.truth[i].win = -1
	}

	// The coordinator, on virtual time.
	if e.syncing {
		c, err := newMerger(e.cfg)
		if err != nil {
			return err
		}
		e.coord = c
	}

	// The nodes.
	n := e.isolates
	switch e.strategy {
	case Central:
		n = 1
	case Location:
		n = e.locations
	}
	for i := 0; i < n; i++ {
		nd := &node{index: i, loc: i % e.locations}
		if e.strategy == Location {
			nd.loc = i
		}
		if err := e.start(nd, 0); err != nil {
			return err
		}
		e.nodes = append(e.nodes, nd)
		if e.lifetime > 0 && (e.strategy == LocalOnly || e.early) {
			e.scheduleEvict(nd, 0)
		}
	}
	return nil
}

// start (re)creates nd's isolate at now, cold, with a new id.
func (e *engine) start(nd *node, now int64) error {
	cfg := e.cfg
	cfg.IsolateID = e.strategy + "-" + strconv.Itoa(nd.index) + "-" + strconv.Itoa(int(nd.gen))
	seed := e.seed*1_000_003 + uint64(nd.index)*7919 + uint64(nd.gen)
	iso, err := e.rt.NewIsolate(e.ctx, cfg, seed)
	if err != nil {
		return fmt.Errorf("sim: isolate: %w", err)
	}
	nd.iso, nd.applied, nd.share = iso, 0, nil
	nd.attempt++
	if e.syncing {
		o := syncloop.Options{Interval: time.Duration(e.interval), Jitter: e.sc.SyncJitter,
			MinSpacing: time.Duration(e.sc.EarlySpacing), BackoffBase: time.Duration(e.interval),
			BackoffMax: max(time.Duration(e.interval)*32, 30*time.Second)}
		if !e.early {
			o.MinSpacing = -1
		}
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
		nd.iso.Close(e.ctx)
	}
	if e.coord != nil {
		e.coord.Close()
	}
}

// partitioned reports whether nd is cut off from the coordinator at now.
func (e *engine) partitioned(nd *node, now int64) bool {
	for i := range e.parts {
		p := &e.parts[i]
		if now < p.start || now >= p.end {
			continue
		}
		if p.loc >= 0 && p.loc == nd.loc {
			return true
		}
		if p.iso >= 0 && e.strategy != Location && p.iso == nd.index {
			return true
		}
	}
	return false
}

// run simulates the scenario and fills e.res.
func (e *engine) run() error {
	var nreq int64
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
			if err := e.ctx.Err(); err != nil {
				return fmt.Errorf("sim: %w", err)
			}
		}
	}
	e.finish()
	return nil
}

// request decides one request at now and records it.
func (e *engine) request(now int64, isoIdx int, gid int32, lim int, cost int64) error {
	k := &e.keys[gid]
	tr := &e.truth[gid]
	e.rollWindow(gid, now)
	tr.offered += cost
	e.res.Requests++

	var allowed bool
	var added int64
	switch e.strategy {
	case Central:
		var ok bool
		added, ok = e.roundTrip(isoIdx, gid, now)
		if ok {
			d, err := e.nodes[0].iso.Decide(e.ctx, lim, k.name, cost, now)
			if err != nil {
				return fmt.Errorf("sim: central decide: %w", err)
			}
			allowed = d.Allowed
			if allowed {
				e.res.CoordWrites++
			}
		} else {
			allowed = e.failPolicy(e.nodes[0], gid, cost, now, isoIdx)
		}
	case LocalOnly:
		d, err := e.nodes[isoIdx].iso.Decide(e.ctx, lim, k.name, cost, now)
		if err != nil {
			return fmt.Errorf("sim: decide: %w", err)
		}
		allowed = d.Allowed
	default:
		var nd *node
		if e.strategy == Location {
			nd = e.nodes[isoIdx%e.locations]
		} else {
			nd = e.nodes[isoIdx]
		}
		if e.policy != 'o' && nd.sched.Stale(now) {
			allowed = e.failPolicy(nd, gid, cost, now, -1)
			if !allowed || e.policy == 'c' {
				break
			}
		}
		d, err := nd.iso.Decide(e.ctx, lim, k.name, cost, now)
		if err != nil {
			return fmt.Errorf("sim: decide: %w", err)
		}
		allowed = d.Allowed
		if d.SyncRetry && (e.strategy == Strict || e.strategy == Approximate) {
			// Hold the request for a lease: sync now (or with the sync
			// in flight) and decide again when the reply arrives.
			nd.waiting = append(nd.waiting, waiter{t: now, cost: cost, gid: gid, lim: lim})
			if !nd.sched.InFlight() {
				return e.startSync(nd, now)
			}
			return nil
		}
		if d.SyncWanted && e.early {
			before := nd.sched.Next()
			if nd.sched.Want(now) {
				if err := e.startSync(nd, now); err != nil {
					return err
				}
			} else if nd.sched.Next() < before {
				e.armTimer(nd)
			}
		}
	}
	e.record(gid, cost, allowed, added)
	return nil
}

// record accounts a decided request of key gid in the current window.
func (e *engine) record(gid int32, cost int64, allowed bool, added int64) {
	tr := &e.truth[gid]
	e.hist.add(added)
	if allowed {
		e.res.Admitted += cost
		tr.admitted += cost
	} else {
		e.res.Denied++
		tr.denied += cost
	}
}

// rollWindow moves key gid's truth to the window of now.
func (e *engine) rollWindow(gid int32, now int64) {
	tr := &e.truth[gid]
	if w := now / e.keys[gid].period; w != tr.win {
		e.flush(gid)
		tr.win, tr.offered, tr.admitted, tr.denied = w, 0, 0, 0
	}
}

// settle decides the requests nd held for a lease, at now: again from the
// module when a reply arrived (ok), else denied.
func (e *engine) settle(nd *node, now int64, ok bool) error {
	keep := nd.waiting[:0]
	for _, w := range nd.waiting {
		e.rollWindow(w.gid, now)
		allowed := false
		if ok {
			d, err := nd.iso.Decide(e.ctx, w.lim, e.keys[w.gid].name, w.cost, now)
			if err != nil {
				return fmt.Errorf("sim: decide: %w", err)
			}
			allowed = d.Allowed
			if w.tries++; d.SyncRetry && w.tries < maxLeaseWaits {
				keep = append(keep, w)
				continue
			}
		}
		e.record(w.gid, w.cost, allowed, now-w.t)
	}
	nd.waiting = keep
	if len(keep) > 0 && !nd.sched.InFlight() {
		return e.startSync(nd, now)
	}
	return nil
}

// failPolicy decides a request of an isolate cut off from the coordinator
// (stale view) by the scenario's fail policy. For local-share it reports
// whether the request fits the isolate's share; the caller then asks the
// module too.
func (e *engine) failPolicy(nd *node, gid int32, cost, now int64, central int) bool {
	switch e.policy {
	case 'o':
		return true // central: admit unchecked; edge: caller decides from the last view
	case 'c':
		return false
	}
	if nd.share == nil {
		nd.share = map[int32]shareCount{}
	}
	key := gid
	if central >= 0 {
		key = gid*int32(e.isolates) + int32(central)
	}
	k := &e.keys[gid]
	sc := nd.share[key]
	if w := now / k.period; w != sc.win {
		sc = shareCount{win: w}
	}
	share := max(k.cap/int64(e.isolates), 1)
	if sc.used+cost > share {
		nd.share[key] = sc
		return false
	}
	sc.used += cost
	nd.share[key] = sc
	return true
}

// roundTrip is the central strategy's network: the added latency of one
// request, with retries on loss, and whether it reached the counter.
func (e *engine) roundTrip(isoIdx int, gid int32, now int64) (int64, bool) {
	probe := node{index: isoIdx, loc: isoIdx % e.locations}
	k := &e.keys[gid]
	var added int64
	for attempt := 0; attempt < 4; attempt++ {
		e.res.SyncRequests++
		e.res.SyncBytes += k.batchBytes
		if e.partitioned(&probe, now+added) {
			e.res.SyncFailures++
			return added + e.timeout, false
		}
		l1, l2 := e.lat.sample(e.netRng), e.lat.sample(e.netRng)
		lost := e.sc.Network.Loss > 0 && (e.netRng.Float64() < e.sc.Network.Loss || e.netRng.Float64() < e.sc.Network.Loss)
		if !lost && l1+l2 <= e.timeout {
			e.res.SyncBytes += k.replyBytes
			return added + l1 + l2, true
		}
		e.res.SyncFailures++
		added += e.timeout
	}
	return added, false
}

// startSync begins a sync attempt of nd at now.
func (e *engine) startSync(nd *node, now int64) error {
	out, err := nd.iso.SyncOut(e.ctx, now, nd.out[:0])
	if err != nil {
		return fmt.Errorf("sim: sync out: %w", err)
	}
	nd.out = out
	if len(out) == 0 {
		nd.sched.Idle(now)
		e.armTimer(nd)
		return nil
	}
	nd.sched.Begin(now)
	nd.attempt++
	e.res.SyncRequests++
	e.res.SyncBytes += int64(len(out))
	ev := event{tok: nd.attempt, node: int32(nd.index), gen: nd.gen}
	l1 := e.lat.sample(e.netRng)
	loss := e.sc.Network.Loss
	if (loss > 0 && e.netRng.Float64() < loss) || e.partitioned(nd, now) || l1 > e.timeout {
		ev.t, ev.kind = now+e.timeout, evTimeout
		e.heap.push(ev)
		return nil
	}
	ev.t, ev.kind = now+l1, evArrive
	e.heap.push(ev)
	return nil
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
		return e.startSync(nd, now)
	case evArrive:
		if ev.gen != nd.gen {
			return nil // the isolate was evicted: its batch dies with it
		}
		var b wire.Batch
		if err := b.UnmarshalMsg(nd.out); err != nil {
			return fmt.Errorf("sim: batch: %w", err)
		}
		reply, err := e.coord.sync(&b, now)
		l2 := e.lat.sample(e.netRng)
		back := event{tok: ev.tok, node: ev.node, gen: ev.gen}
		if err != nil {
			back.t, back.kind = now+l2, evTimeout // the error reaches the isolate
			e.heap.push(back)
			return nil
		}
		if b.Seq > nd.applied {
			nd.applied = b.Seq
			e.res.CoordWrites++
		}
		if ev.tok != nd.attempt {
			return nil // a stale attempt: its reply is ignored
		}
		e.scratch = reply.AppendMsg(e.scratch[:0])
		e.res.SyncBytes += int64(len(e.scratch))
		loss := e.sc.Network.Loss
		if (loss > 0 && e.netRng.Float64() < loss) || e.partitioned(nd, now+l2) {
			// Lost on the way back: the isolate times out (the batch was
			// applied; the retry is answered as a duplicate).
			back.t, back.kind = now+e.timeout, evTimeout
			e.heap.push(back)
			return nil
		}
		nd.reply = append(nd.reply[:0], e.scratch...)
		back.t, back.kind = now+l2, evReply
		e.heap.push(back)
	case evReply:
		if ev.gen != nd.gen || ev.tok != nd.attempt || !nd.sched.InFlight() {
			return nil
		}
		err := nd.iso.SyncIn(e.ctx, nd.reply, now)
		if err != nil {
			e.res.SyncFailures++
			nd.sched.Failure(now)
		} else {
			nd.sched.Success(now)
		}
		if serr := e.settle(nd, now, err == nil); serr != nil {
			return serr
		}
		e.armTimer(nd)
	case evTimeout:
		if ev.gen != nd.gen || ev.tok != nd.attempt || !nd.sched.InFlight() {
			return nil
		}
		e.res.SyncFailures++
		nd.sched.Failure(now)
		if err := e.settle(nd, now, false); err != nil {
			return err
		}
		e.armTimer(nd)
	case evEvict:
		if ev.gen != nd.gen {
			return nil
		}
		e.res.Evictions++
		if err := e.settle(nd, now, false); err != nil {
			return err
		}
		if err := nd.iso.Close(e.ctx); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		nd.gen++
		if err := e.start(nd, now); err != nil {
			return err
		}
		e.scheduleEvict(nd, now)
	}
	return nil
}

// flush accounts the finished window of key gid.
func (e *engine) flush(gid int32) {
	tr := &e.truth[gid]
	if tr.win < 0 || tr.offered == 0 {
		return
	}
	k := &e.keys[gid]
	r := &e.res
	r.Windows++
	r.Capacity += k.cap
	r.Offered += tr.offered
	if over := tr.admitted - k.cap; over > 0 {
		pct := 100 * float64(over) / float64(k.cap)
		r.Overrun += over
		r.OverWindows++
		r.WorstOverrun = max(r.WorstOverrun, over)
		r.WorstOverrunPct = math.Max(r.WorstOverrunPct, pct)
		e.overs = append(e.overs, pct)
	}
	r.Unserved += min(tr.denied, max(k.cap-tr.admitted, 0))
	e.utilNum += tr.admitted
	e.utilDen += min(tr.offered, k.cap)
}

func (e *engine) finish() {
	for _, nd := range e.nodes {
		e.settle(nd, e.duration, false) // still waiting at the end: denied
	}
	for g := range e.truth {
		e.flush(int32(g))
		e.truth[g].win = -1
	}
	r := &e.res
	for _, s := range e.sources {
		r.TraceNotReplayed += s.left()
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
	}
	if r.Requests > 0 {
		r.SyncPerDecision = 100 * float64(r.SyncRequests) / float64(r.Requests)
	}
	if e.utilDen > 0 {
		r.Utilisation = 100 * float64(e.utilNum) / float64(e.utilDen)
	}
	r.SyncPerSec = float64(r.SyncRequests) / secs
	r.SyncBytesPerSec = float64(r.SyncBytes) / secs
	r.CoordWritesPerSec = float64(r.CoordWrites) / secs
	r.LatencyP50 = Duration(e.hist.quantile(0.50))
	r.LatencyP99 = Duration(e.hist.quantile(0.99))
}
