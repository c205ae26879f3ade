package core

import (
	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// limiter is a configured limiter with its derived flags.
type limiter struct {
	cfg       wire.LimiterConfig
	bucket    bool
	sliding   bool
	strict    bool
	readThru  bool
	bound     int64 // the largest limit, burst or lease any key may have (check.go)
	overrides map[string]int64
	// pausedUntil: the limiter is paused as a whole until then, ns (0:
	// not paused; limpause.go).
	pausedUntil int64
}

// Core is the limiter state of one isolate. It is not safe for concurrent
// use; an isolate is single-threaded.
type Core struct {
	cfg   wire.Config
	lims  []limiter
	tab   table
	dirty []ref // entries with something to sync (may hold stale refs)
	// lapses: entries of strict windowed keys holding a lease with a
	// life, watched for lapsing with units left (lapse.go; may hold stale
	// refs).
	lapses []ref

	seq        int64       // sequence number of the last batch cut
	cutAt      int64       // time the last batch was cut, ns (moved back with the clock: stepback.go)
	outAt      int64       // time the last batch was cut, ns, as its header says (never moved)
	gap        int64       // smoothed time between two cuts, ns
	rtt        int64       // smoothed time from a cut to its reply, ns
	inflight   []item      // deltas of the outstanding batch
	denItems   []item      // final denials of the outstanding batch (cost in delta), for Recall
	flightKeys []byte      // the keys of inflight's and denItems' items, for Recall (retime.go)
	preCut     cutState    // what the last cut changed, for Recall (retime.go)
	outBuf     []byte      // encoded outstanding batch; empty when none
	entBuf     []byte      // scratch of SyncOut: the encoded entries of a batch
	denBody    []byte      // scratch of SyncOut: the encoded denials of a batch
	denBuf     []byte      // the outstanding batch's denials: array header and denBody
	sure       bool        // the last evaluation denied on the global view alone (evalWindow)
	dryLong    bool        // the last evaluation denied for a dry spell of a period of 100 s or more (recheck)
	ending     bool        // a graceful stop's last batch is still to be cut (release.go)
	pred       predecessor // the incarnation whose leases this one takes over (handover.go)
	views      []replyView // scratch of SyncIn: the decoded entries of a reply (len == cap)
	rr         wire.ReplyReader
	stats      wire.Stats

	ups      map[int32]*upState // upstream state by entry index (upstream.go); nil until a key has some
	upDirty  []int32            // entries whose upstream state is to be reported
	upBuf    []byte             // encoded signals of the outstanding batch
	upEnt    []byte             // scratch of appendSignals: the outstanding batch's signals, without their array header
	upN      int                // signals in upEnt
	upCarry  []byte             // a recalled batch's signals (retime.go), encoded, for the next cut
	upCarryN int                // signals in upCarry

	rgen    int64 // reset generation of the last reply applied (resets.go); 0: none
	hold    int64 // ns: until then a denial is cached here, and a denial asks for a heartbeat
	beatAsk uint8 // requests denied from a denial cached here since the last batch (saturating): from beatDenials on, SyncOut may send a heartbeat
	stopped bool  // Release was called: no more heartbeats
	heard   int64 // ns: when the last reply was applied (0: never)
	beatNow bool  // a denial asked for a sync (recheck), or cost was reported again (repend): the next SyncOut cuts a batch even with nothing urgent
	held    bool  // the decision being recorded answers SyncRetry: the host holds the request (record)
	replies int64 // replies applied

	akBuf  []byte // scratch of Amend: the encoded asks
	akArr  []byte // the outstanding amendment's asks: array header and akBuf
	outEnd bool   // the outstanding batch is a graceful stop's last
	late   bool   // a reply to the last batch was applied and no batch was cut since: another of its replies may come (syncIn)
	// An amendment's reply may come after the next batch is cut (syncIn).
	amendSeq  int64                   // the batch (Core.seq) last amended; 0: none
	amendPrev bool                    // the batch before the outstanding one was amended: its amendment's reply may still come
	prevCut   int64                   // ns: when the batch before the outstanding one was cut
	prior     bool                    // the reply being applied is to the batch before the outstanding one (an amendment's)
	priorN    int64                   // the reply (Core.replies) that was such a reply (record)
	latest    int64                   // ns: the latest time a call brought (stepback.go)
	offset    int64                   // ns: the clock offset the host last told (ClockOffset)
	asks      [wire.MaxChecks]heldAsk // the last decision's asks for a lease (withdraw.go)
	rolled    []rolledCost            // pending cost rolls dropped, kept aside for a step back (rolled.go)
	nAsks     int
}

type ref struct {
	idx int32
	gen uint32
}

// item is one delta of the outstanding batch, undone from the local
// counters when the coordinator acknowledges it.
type item struct {
	ref
	win   int64 // the window the batch names (the coordinator counts it there)
	delta int64
	lwin  int64 // the window of the key's counters it is in (win, unless a clock step moved them: retime.go)
	koff  int32 // the key's bytes in Core.flightKeys (Recall re-inserts an evicted key)
	klen  uint16
	lim   uint8
	// held: a step forward moved its counters to the next window (lwin ==
	// win+1), and by the batch's cut time on the new clock that window had
	// not begun: every unit of it was admitted in win, where the
	// coordinator counts it (the ack does not report it again, repend).
	held bool
}

// Result is the outcome of a decision: the system's one decision type,
// wire.Result.
type Result = wire.Result

// Check is one (limiter, key, cost) of a multi-limiter decision.
type Check struct {
	Limiter int
	Key     []byte
	Cost    int64
}

// New validates cfg and returns a Core for it.
func New(cfg wire.Config) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Core{cfg: cfg}
	if c.cfg.MaxKeys == 0 {
		c.cfg.MaxKeys = wire.DefaultMaxKeys
	}
	c.tab.max = int(c.cfg.MaxKeys)
	for _, l := range cfg.Limiters {
		lm := limiter{cfg: l, bucket: l.IsBucket(), sliding: l.Algorithm == wire.SlidingWindow,
			strict: l.Leased(), readThru: l.ReadThrough && !l.Leased(), bound: bound(&l)}
		if len(l.Overrides) > 0 {
			lm.overrides = make(map[string]int64, len(l.Overrides))
			for _, o := range l.Overrides {
				lm.overrides[o.Key] = o.Limit
			}
		}
		c.lims = append(c.lims, lm)
	}
	return c, nil
}

// Config returns the configuration the core runs with (MaxKeys defaulted).
func (c *Core) Config() wire.Config { return c.cfg }

// LimiterIndex returns the index of the limiter named name, or -1.
func (c *Core) LimiterIndex(name string) int {
	for i := range c.lims {
		if c.lims[i].cfg.Name == name {
			return i
		}
	}
	return -1
}

func (c *Core) limiterIndexBytes(name []byte) int {
	for i := range c.lims {
		if wire.Equal(c.lims[i].cfg.Name, name) {
			return i
		}
	}
	return -1
}

// override returns the limit configured for key of limiter lim, if any.
// Most limiters have no overrides; the map lookup (which copies key into
// a string under TinyGo) is skipped for them.
func (c *Core) override(lim int, key []byte) (int64, bool) {
	if len(c.lims[lim].overrides) == 0 {
		return 0, false
	}
	o, ok := c.lims[lim].overrides[string(key)]
	return o, ok
}

// Stats returns the isolate's counters.
func (c *Core) Stats() wire.Stats {
	s := c.stats
	s.Keys = int64(c.tab.live)
	for i := 0; i < c.tab.n; i++ {
		if e := c.tab.at(int32(i)); e.inUse() {
			s.UnsyncedCost = addSat(s.UnsyncedCost, e.unsynced())
		}
	}
	t := &c.tab
	s.StateBytes = int64(len(t.chunks))*chunkSize*entrySize + t.keyB + int64(cap(t.long))*12 +
		t.leases.bytes(leaseSize) + t.rates.bytes(rateSize) + int64(len(t.slots))*4 +
		int64(cap(c.dirty))*8 + int64(cap(c.inflight))*40 + int64(cap(c.denItems))*40 + int64(cap(c.flightKeys)) + int64(cap(c.outBuf)) + int64(cap(c.entBuf)) + int64(cap(c.denBody)) + int64(cap(c.denBuf))
	return s
}

// Sizes of an entry and of its side records, the same natively and on
// wasm32 (their fields are all of fixed size; a test checks them).
const (
	entrySize = 176
	leaseSize = 136
	rateSize  = 32
)

func (c *Core) checkArgs(lim int, key []byte, cost, now int64) error {
	switch {
	case lim < 0 || lim >= len(c.lims):
		return ErrUnknownLimiter
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > wire.MaxKeyLen:
		return ErrKeyTooLong
	case cost < 0 || cost > wire.MaxCost:
		return ErrBadCost
	case now < 0:
		return ErrBadTime
	}
	return nil
}

// lookup finds or creates the entry for (lim, key) and returns its index.
func (c *Core) lookup(lim int, key []byte, now int64) int32 {
	h := hashKey(uint16(lim), key)
	idx := c.tab.find(uint8(lim), key, h)
	if idx < 0 {
		return c.insert(lim, key, h, now)
	}
	// A key earns its CLOCK reference bit by being used again: a flood of
	// keys seen once is evicted before keys in use.
	c.tab.at(idx).flags |= fRef
	return idx
}

// insert adds (lim, key) with hash h to the table. It is kept out of lookup
// on purpose: under TinyGo a function that may allocate zeroes a GC frame
// on entry (a 128-byte memory.fill, which wazero runs as a call to Go's
// memmove), and lookup is on every decision's path.
//
//go:noinline
func (c *Core) insert(lim int, key []byte, h uint32, now int64) int32 {
	idx, evicted, lost := c.tab.insert(uint8(lim), key, h, now)
	if evicted {
		c.stats.Evictions++
		c.stats.EvictedUnsynced += lost
	}
	e := c.tab.at(idx)
	e.limit = c.lims[lim].cfg.Limit
	if o, ok := c.override(lim, key); ok {
		e.limit = o
	}
	e.isolates = 1
	if c.lims[lim].strict {
		c.tab.newLease(e).dryWin = -1
	}
	return idx
}

// Decide decides one (limiter, key, cost) at time now (ns) into r.
// Cost 0 peeks without consuming.
func (c *Core) Decide(lim int, key []byte, cost, now int64, r *Result) error {
	if err := c.checkArgs(lim, key, cost, now); err != nil {
		c.stats.Errors++
		return err
	}
	c.see(now)
	c.nAsks = 0
	idx := c.lookup(lim, key, now)
	e := c.tab.at(idx)
	now = c.clamp(e, now)
	c.advance(idx, e, now)
	c.sure, c.dryLong = false, false
	quiet := true
	if len(c.ups) != 0 {
		c.upExpire(lim, idx, e, now)
		quiet = !c.fleetLimited(idx, e)
	}
	c.evaluate(lim, e, cost, now, r)
	if len(c.ups) != 0 {
		c.upCheck(lim, idx, e, cost, now, r)
	}
	c.limPaused(lim, now, r)
	if l := &c.lims[lim]; cost == 0 && r.Allowed && c.peekCold(l, e, now) {
		// A peek answers the global estimate, and this isolate knows
		// none worth telling (it does not use the key): the next batch
		// names the key and goes out at once, and a host that holds
		// SyncRetry answers after its reply (resets.go, name). A
		// limiter that decides alone (approximate) never waits: this
		// peek answers what the isolate knows, the next ones the view
		// the batch brings.
		r.SyncRetry, r.SyncWanted = l.strict || l.readThru, true
		c.beatNow = true
		c.name(idx)
	}
	c.held = r.SyncRetry
	c.record(lim, idx, cost, now, r.Allowed, quiet && c.sure && !r.SyncRetry)
	c.held = false
	if !r.Allowed {
		c.holdFor(now, r.RetryAfter)
		c.askBeat(now)
		if c.recheck(now, r) {
			c.name(idx)
		}
		c.denied(idx, cost, r)
	}
	return nil
}

// denied counts a denial of cost at idx for the operator's counts
// (wire.Batch.Denials) when it is final: not one answered SyncRetry (a
// lease to wait for, a cold key, a recheck), which the host decides
// again. Quiet or not, it makes no batch alone (urgent): it rides along.
func (c *Core) denied(idx int32, cost int64, r *Result) {
	if r.SyncRetry || cost <= 0 {
		return
	}
	e := c.tab.at(idx)
	e.den = addSat(e.den, cost)
	c.markDirty(idx, e)
}

// DecideMulti checks several limiters together, all or nothing: the cost of
// each is consumed only if every check passes. r describes the binding
// limiter. Checks that name the same (limiter, key) are one check of their
// summed cost: three checks of cost 3 on one key need 9 of its limit.
func (c *Core) DecideMulti(checks []Check, now int64, r *Result) error {
	if len(checks) == 0 || len(checks) > wire.MaxChecks {
		c.stats.Errors++
		return ErrTooManyChecks
	}
	for i := range checks {
		if err := c.checkArgs(checks[i].Limiter, checks[i].Key, checks[i].Cost, now); err != nil {
			c.stats.Errors++
			return err
		}
	}
	// Merge repeated (limiter, key) checks into the first one, summing
	// their costs (at most 8 x 2^40, far from overflow).
	var uniq [wire.MaxChecks]Check
	n := 0
merge:
	for _, ch := range checks {
		for j := 0; j < n; j++ {
			if uniq[j].Limiter == ch.Limiter && sameKey(uniq[j].Key, ch.Key) {
				uniq[j].Cost += ch.Cost
				continue merge
			}
		}
		uniq[n] = ch
		n++
	}
	checks = uniq[:n]
	c.see(now)
	c.nAsks = 0
	var idxs [wire.MaxChecks]int32
	var gens [wire.MaxChecks]uint32
	var times [wire.MaxChecks]int64
	var one Result
	allowed, sync, miss := true, false, true
	c.dryLong = false
	for i, ch := range checks {
		idx := c.lookup(ch.Limiter, ch.Key, now)
		e := c.tab.at(idx)
		idxs[i], gens[i] = idx, e.gen
		times[i] = c.clamp(e, now)
		c.advance(idx, e, times[i])
		if len(c.ups) != 0 {
			c.upExpire(ch.Limiter, idx, e, times[i])
		}
		c.evaluate(ch.Limiter, e, ch.Cost, times[i], &one)
		if len(c.ups) != 0 {
			c.upCheck(ch.Limiter, idx, e, ch.Cost, times[i], &one)
		}
		c.limPaused(ch.Limiter, times[i], &one)
		sync = sync || one.SyncWanted
		switch {
		case i == 0:
			*r = one
		case !one.Allowed && allowed:
			*r = one
		case one.Allowed && allowed && one.Remaining < r.Remaining:
			*r = one
		}
		r.SyncWanted = sync
		allowed = allowed && one.Allowed
		if !one.Allowed && !one.SyncRetry {
			miss = false
		}
	}
	r.SyncRetry = !allowed && miss
	// Lookups of later checks may have evicted an earlier entry when the
	// table is tiny; re-resolve before committing.
	for i, ch := range checks {
		idx := idxs[i]
		if c.tab.at(idx).gen != gens[i] {
			idx = c.lookup(ch.Limiter, ch.Key, now)
			c.advance(idx, c.tab.at(idx), times[i]) // record counts in the current window
		}
		c.held = r.SyncRetry
		c.record(ch.Limiter, idx, ch.Cost, times[i], allowed, false)
		c.held = false
	}
	if !allowed {
		r.Allowed = false
		c.holdFor(now, r.RetryAfter)
		c.askBeat(now)
		re := c.recheck(now, r)
		for i, ch := range checks {
			idx := idxs[i]
			if c.tab.at(idx).gen != gens[i] {
				idx = c.lookup(ch.Limiter, ch.Key, now)
			}
			if re {
				c.name(idx)
			}
			c.denied(idx, ch.Cost, r)
		}
	}
	return nil
}

// sameKey reports whether a and b hold the same bytes (a loop: no string
// conversion for TinyGo to allocate).
func sameKey(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// clamp keeps time per key monotonic: an earlier time than the key has
// seen is treated as the latest time seen (no negative windows).
func (c *Core) clamp(e *entry, now int64) int64 {
	if now < e.last {
		c.stats.ClockBackwards++
		return e.last
	}
	e.last = now
	return now
}

// record updates counters after a decision: consumption when allowed,
// demand otherwise unless quiet. Decide passes quiet for a windowed denial
// that needs no sync (c.sure): one the global view alone justifies (the
// window cannot open up again before it ends), or a leased limiter's
// denial in a dry spell (the coordinator just said it has nothing to
// give); it changes no count, so isolates that only deny have nothing to
// sync. Denials that rest on the estimate of the others' traffic still
// sync (the estimate may be wrong, and only a fresh view tells), as do
// buckets (they refill) and denials that ask for a sync (SyncRetry).
func (c *Core) record(lim int, idx int32, cost, now int64, allowed, quiet bool) {
	e := c.tab.at(idx)
	c.stats.Decisions++
	if !allowed {
		c.stats.Denials++
	}
	l := &c.lims[lim]
	if cost == 0 || (!allowed && (quiet && !l.bucket || c.neverFits(l, e, cost))) {
		e.setExp(l, now)
		return
	}
	ask := cost
	if l.strict {
		// The host decides the requests it holds (SyncRetry) again when
		// a reply comes. Those that asked after the batch it answers was
		// cut have their ask in the next batch already: deciding them
		// again (admitted, or held once more) asks for nothing new, or
		// one request would ask twice and be granted twice (the second
		// unit unused, stranded in the window).
		s := c.tab.lease(e)
		if s.unsentSeq != c.seq { // a batch was cut since: it sent them
			s.unsent, s.unsentSeq, s.amended = 0, c.seq, 0
		}
		if s.reaskN != c.replies { // the first decision after a reply
			s.reask, s.reaskN = s.unsent, c.replies
			if c.priorN == c.replies {
				// An amendment's reply that came after the next batch
				// was cut: the requests held before that cut asked in
				// it (s.asked), and its reply is still to come.
				s.reask = addSat(s.reask, s.asked)
			}
		}
		k := int64(0) // of cost, what this request asked before, not sent yet
		if now-c.heard <= reDecideSpan {
			k = min64(s.reask, cost)
			s.reask -= k
			ask -= k
		}
		if c.held {
			s.unsent += ask
			c.keepAsk(idx, e.gen, ask+k, cost) // Withdraw takes back what no attempt carried of both
		}
	}
	e.demand = addSat(e.demand, ask)
	if allowed {
		if l.bucket {
			e.tat = limitmath.AdvanceTAT(e.tat, now, cost, l.cfg.Period, e.limit)
		} // windowed: advance rolled e to the window of now
		e.lCur += cost
		e.pCur += cost
		if l.strict {
			c.tab.lease(e).lease -= cost
		}
	}
	e.setExp(l, now)
	c.markDirty(idx, e)
}

// neverFits reports whether cost can never pass limiter l on e (its
// RetryAfter is -1): more than the key's limit in a window, more than a
// bucket's burst. Its denial asks the coordinator for nothing: as demand
// it would size a lease nobody uses, and a bucket charges a lease that
// expired unreported as spent, so one such request (a caller's cost of a
// thousand on a bucket of a hundred) emptied the bucket for every isolate
// for a period.
func (c *Core) neverFits(l *limiter, e *entry, cost int64) bool {
	if l.bucket {
		return cost > l.cfg.EffectiveBurst(e.limit)
	}
	return cost > e.limit
}

// markDirty puts e (at idx) on the list of entries with something to sync.
func (c *Core) markDirty(idx int32, e *entry) {
	if !e.dirty() {
		e.flags |= fDirty
		if len(c.dirty) >= 2*c.tab.max+64 {
			c.compactDirty()
		}
		c.dirty = append(c.dirty, ref{idx, e.gen})
	}
}

// reDecideSpan is how long after a reply (ns) a host's decisions are taken
// for the decisions again of the requests it held (record): hosts decide
// them at once, on the clock they applied the reply with.
const reDecideSpan = 1e6

// compactDirty drops references to evicted entries, so the dirty list stays
// bounded by the key cap even when no sync ever happens.
func (c *Core) compactDirty() {
	n := 0
	for _, d := range c.dirty {
		if c.tab.at(d.idx).gen == d.gen && c.tab.at(d.idx).dirty() {
			c.dirty[n] = d
			n++
		}
	}
	c.dirty = c.dirty[:n]
}

// Reset forgets all local state of (limiter, key), including cost not yet
// synced. The global count is reset at the coordinator.
func (c *Core) Reset(lim int, key []byte) error {
	if err := c.checkArgs(lim, key, 0, 0); err != nil {
		c.stats.Errors++
		return err
	}
	h := hashKey(uint16(lim), key)
	if idx := c.tab.find(uint8(lim), key, h); idx >= 0 {
		c.tab.remove(idx)
	}
	return nil
}
