package merge

import (
	"encoding/binary"
	"errors"
	"math"
	"unsafe"

	"github.com/edgelimit/edgelimit/wasm/limitmath"
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Storage layout (one Pebble key per limiter key, one per isolate, plus
// the log of the group commits since the last checkpoint, see wal.go):
//
//	'k' len(limiter) limiter key  -> keyState: varints win, count, prev, tat,
//	                                 then the isolates holding strict leases,
//	                                 their standing leases, their lease lives
//	                                 ('x'), their asks ('n'), what sliding
//	                                 windows' leases hold of the window before
//	                                 theirs ('p', optional), when their leases
//	                                 are void on their clocks ('v', optional),
//	                                 what the last reply granted for refused
//	                                 requests ('o', optional), what its asks
//	                                 say of its requests' cost ('c', optional),
//	                                 and the optional upstream section ('u',
//	                                 upstream.go)
//	'h' isolate                   -> hwm: varints seq, lastSeen, uvarint batchSum of seq (absent in older records),
//	                                 then 16 bytes of the secret's hash when the isolate has one (sequence.go)
//	'l' gen                       -> log record: the new states of one group
//
// Windowed limiters keep only the newest window W and W-1 in the record, so
// old windows are garbage-collected as soon as a newer window is written.
const (
	prefixKey = 'k'
	prefixHWM = 'h'
	stateVer  = 1
)

// keyState is the merged state of one (limiter, key).
type keyState struct {
	lim   *wire.LimiterConfig
	skey  string     // storage key
	win   int64      // windowed: newest window index with a count
	count int64      // windowed: count in win
	prev  int64      // windowed: count in win-1
	tat   int64      // bucket: theoretical arrival time, ns
	isos  []isoState // strict limiters: the isolates' leases and demand
	sk    isoSketch  // approximate limiters: how many isolates report the key (leased ones: the spread, spread.go)
	dirty bool       // changed since the last Stage
	// unitAsks and unit (leased; in what was padding): how many batches
	// asked for cost in the key (up to 255) and the greatest common
	// divisor of what each asked, about the cost of one request
	// (costUnit). Stored (section 'c', appendCosts).
	unitAsks uint8
	askN     uint8   // leased, in what was padding: sparse asks seen, up to 255 (fitShare). Stored ('c').
	fitCost  float32 // leased, in what was padding: see fitShare. Stored ('c').
	epoch    int64   // Merger.ckptEpoch when last logged
	ckptSlot int32   // index of its op in Merger.ckptOps, when epoch is current
	unit     int32
	gen      int64 // Stage that holds the last change
	// oldest is a lower bound of isos[*].seen (math.MinInt64 = unknown,
	// see newKeyState): while it is
	// within the last 2 periods, prune has nothing to drop and every
	// isolate is recent.
	oldest  int64
	up      *keyUpstream // the key's upstream state (upstream.go); nil for most keys
	slot    uint64       // residency slot (prefetch)
	mark    int64        // Merger.applySeq of the last Apply that touched the key
	slotIdx int32        // index of the key in that Apply's slots
	// How often the key's isolates with a request in a window had one in
	// the next (carry.go): observations, those that had none, decayed by
	// half per window since carryWin. Not stored.
	carryN, carryStop float32
	askCost           float32 // leased, in what was padding: see fitShare. Stored ('c').
	carryWin          int64
	fullWin           int64 // 1 + the window last logged as full (fullnotice.go); 0: none. Not stored.
}

// isoState is what the coordinator remembers about one isolate for one key:
// when it last reported the key and, in strict mode, its lease and demand.
type isoState struct {
	id       string
	seen     int64 // coordinator time of the isolate's last batch with this key, ns
	lease    int64 // strict: budget reserved for the isolate, cost units (>= what it may still admit)
	granted  int64 // strict windowed: the lease last told to the isolate, less the cost it reported since
	leaseWin int64 // strict windowed: window the lease belongs to
	demand   int64 // strict: EWMA of demand per sync, scaled by demandScale
	gap      int64 // strict: EWMA of the time between the isolate's batches with this key, ns
	// Standing lease (strict fixed windows, see lease.go): the isolate may
	// admit up to stand in each window after leaseWin through standUntil
	// without asking (one window, leaseWin+1, but for a sparse isolate's
	// standing unit: spanWindows); standRes (>= stand) is what the
	// coordinator reserves for it in each of them until the isolate has
	// seen its last stand.
	stand, standRes, standUntil int64
	// prevRes (strict sliding windows): what the isolate held of its
	// lease for window leaseWin-1 when its lease moved to leaseWin on a
	// batch cut before leaseWin began. It may have admitted that after the
	// cut and not reported it yet, and the previous window weighs on a
	// sliding window: it counts as spent there (reservation) until a batch
	// cut in leaseWin or later, which reports all of it, or the cost
	// reported for leaseWin-1 since (notePrev).
	prevRes int64
	// expires (leased): coordinator time from which the isolate's
	// unreported lease and stand are given back, as far as it could not
	// have used them (reservation); 0: never (a record written before
	// lease lifetimes). usable: coordinator time by which the isolate
	// stopped admitting under them (expires less the grace).
	expires, usable int64
	// voidAt (leased): on the isolate's clock (wire.Batch.At), when the
	// last lease and standing lease it was told are void there: the
	// latest cut plus the life told (tellLife). A batch cut at or after
	// it reports everything the isolate admitted under them, and it
	// admits nothing more under them: what they hold is unused (see
	// grantWindow's live). 0: none told (or a record from before it).
	voidAt int64
	// asks (leased): the batches with this key that asked for cost since
	// the entry was made, counted up to measuredAsks: from then on its
	// demand per window is measured (holdsAhead).
	asks uint8
	// owed (leased): the cost the last reply granted for requests the
	// isolate was refused in that batch; it decides them again, and their
	// cost comes back as delta, not as new demand (see apply). Stored
	// (section 'o'): a shared-mode coordinator reads the record afresh for
	// every batch, and without it a refused request granted and then
	// reported counted as new demand again (3x the demand), and the
	// others were told its unreported units as unheld.
	owed int64
	// hwm (leased): the isolate's high-water mark as of its last batch
	// with this key, whose heard tells when the coordinator last heard
	// from the isolate at all (lastHeard). Not stored.
	hwm *hwmState
	// reqAfter (leased, windowed): the window after the isolate's last
	// window with a request for the key (one it asked for cost in, or
	// reported cost admitted in); 0: none yet (carry.go). Not stored.
	reqAfter int64
}

// demandScale is the fixed-point scale of isoState.demand, so that a small
// demand still decays smoothly instead of rounding to a constant.
const demandScale = 1024

// hwmState is the exactly-once high-water mark of one isolate.
type hwmState struct {
	id       string
	hash     uint64   // isoHash(id)
	seq      int64    // highest applied batch sequence number
	seen     int64    // coordinator time of the last batch, ns
	sum      uint64   // batchSum of the last applied batch; 0 = unknown (a record older than the digest)
	secret   [16]byte // secretHash of the incarnation's secret; zero: none (sequence.go)
	dirty    bool     // changed since the last Stage
	epoch    int64    // Merger.ckptEpoch when last logged
	ckptSlot int32    // index of its op in Merger.ckptOps, when epoch is current
	gen      int64    // Stage that holds the last change
	// heard: coordinator time of the isolate's last batch that carried
	// every key it had cost or demand to report (not cut short at
	// wire.MaxBatchEntries), ns; 0: none since the Merger started. Not
	// stored.
	heard int64
	// fullSeen: the newest full-window notice told to the isolate; lims:
	// the limiters its batches named since it was loaded, the only ones
	// it is told of (fullnotice.go). Not stored.
	fullSeen int64
	lims     []*wire.LimiterConfig
}

func keyStorageKey(limiter, key string) string {
	b := make([]byte, 0, 2+len(limiter)+len(key))
	b = append(b, prefixKey, byte(len(limiter)))
	b = append(b, limiter...)
	b = append(b, key...)
	return string(b)
}

// splitKeyStorageKey returns the limiter and key of a 'k' storage key.
func splitKeyStorageKey(k []byte) (limiter, key string, ok bool) {
	if len(k) < 2 || k[0] != prefixKey || len(k) < 2+int(k[1]) {
		return "", "", false
	}
	n := int(k[1])
	return string(k[2 : 2+n]), string(k[2+n:]), true
}

func hwmStorageKey(isolate string) string { return string(prefixHWM) + isolate }

// persistIsos reports whether the isolate list is persisted: only strict
// limiters need it (leases must survive a restart; recency does not).
func (s *keyState) persistIsos() bool { return s.lim.Leased() }

func (s *keyState) encode(dst []byte) []byte {
	dst = append(dst, stateVer)
	dst = binary.AppendVarint(dst, s.win)
	dst = binary.AppendVarint(dst, s.count)
	dst = binary.AppendVarint(dst, s.prev)
	dst = binary.AppendVarint(dst, s.tat)
	if !s.persistIsos() {
		return s.encodeUp(binary.AppendUvarint(dst, 0))
	}
	dst = binary.AppendUvarint(dst, uint64(len(s.isos)))
	for i := range s.isos {
		is := &s.isos[i]
		dst = binary.AppendUvarint(dst, uint64(len(is.id)))
		dst = append(dst, is.id...)
		dst = binary.AppendVarint(dst, is.seen)
		dst = binary.AppendVarint(dst, is.lease)
		dst = binary.AppendVarint(dst, is.granted)
		dst = binary.AppendVarint(dst, is.leaseWin)
		dst = binary.AppendVarint(dst, is.demand)
		dst = binary.AppendVarint(dst, is.gap)
	}
	// Standing leases, after the list (records written before them end
	// here and decode with none).
	for i := range s.isos {
		is := &s.isos[i]
		dst = binary.AppendVarint(dst, is.stand)
		dst = binary.AppendVarint(dst, is.standRes)
		dst = binary.AppendVarint(dst, is.standUntil)
	}
	// Lease lifetimes, after the standing leases (records written before
	// them have none: their leases never expire).
	if len(s.isos) > 0 {
		dst = append(dst, 'x')
		for i := range s.isos {
			dst = binary.AppendVarint(dst, s.isos[i].expires)
			dst = binary.AppendVarint(dst, s.isos[i].usable)
		}
	}
	// The batches that asked, after the lease lifetimes (records written
	// before them have none: their isolates' pace counts as measured).
	if len(s.isos) > 0 {
		dst = append(dst, 'n')
		for i := range s.isos {
			dst = append(dst, s.isos[i].asks)
		}
	}
	// What sliding-window leases still hold of the window before theirs,
	// after the asks, only when some isolate holds any (records written
	// before it, and most records, have none).
	dst = s.appendSection(dst, 'p', func(is *isoState) *int64 { return &is.prevRes })
	// When the isolate's leases are void on its clock, after the sliding
	// leases, only when some isolate was told one (records written
	// before it have none: a lease of theirs counts as live until its
	// expiry on the coordinator's clock).
	dst = s.appendSection(dst, 'v', func(is *isoState) *int64 { return &is.voidAt })
	// What the last reply granted for refused requests, after the void
	// times, only when some isolate has any.
	dst = s.appendSection(dst, 'o', func(is *isoState) *int64 { return &is.owed })
	dst = s.appendCosts(dst)
	// The upstream section, after the standing leases (records without
	// one end there).
	return s.encodeUp(dst)
}

// appendSection appends an optional section of the record: tag, then the
// field f of every isolate, only when some isolate's is not 0.
func (s *keyState) appendSection(dst []byte, tag byte, f func(*isoState) *int64) []byte {
	for i := range s.isos {
		if *f(&s.isos[i]) != 0 {
			dst = append(dst, tag)
			for j := range s.isos {
				dst = binary.AppendVarint(dst, *f(&s.isos[j]))
			}
			break
		}
	}
	return dst
}

// readSection reads the optional section tag into the field f of every
// isolate when it comes next (appendSection); without it they stay 0.
func (s *keyState) readSection(d *decoder, tag byte, f func(*isoState) *int64) {
	if d.err == nil && len(s.isos) > 0 && len(d.b) > 0 && d.b[0] == tag {
		d.b = d.b[1:]
		for i := range s.isos {
			*f(&s.isos[i]) = d.varint()
		}
	}
}

// appendCosts appends the optional section of what the key's asks say of
// the cost of its requests (costUnit, fitShare), after the isolates'
// sections, only when some batch asked: 'c', unitAsks, uvarint unit,
// askN, then fitCost and askCost as float32 bits (little endian). A
// coordinator over Redis merges every batch on the record read afresh:
// without it each group started from a unit of 1 and a full fit share,
// and a sparse isolate of a key of requests of cost 40 was granted units
// ahead it could not use.
func (s *keyState) appendCosts(dst []byte) []byte {
	if s.unitAsks == 0 && s.askN == 0 {
		return dst
	}
	dst = append(dst, 'c', s.unitAsks)
	dst = binary.AppendUvarint(dst, uint64(max(s.unit, 0)))
	dst = append(dst, s.askN)
	dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(s.fitCost))
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(s.askCost))
}

// readCosts reads the section appendCosts wrote, when it comes next.
func (s *keyState) readCosts(d *decoder) {
	if d.err != nil || len(d.b) == 0 || d.b[0] != 'c' {
		return
	}
	if len(d.b) < 2 {
		d.err = errCorrupt
		return
	}
	s.unitAsks = d.b[1]
	d.b = d.b[2:]
	s.unit = int32(d.uvarint(math.MaxInt32))
	if d.err != nil || len(d.b) < 9 {
		d.err = errCorrupt
		return
	}
	s.askN = d.b[0]
	s.fitCost = math.Float32frombits(binary.LittleEndian.Uint32(d.b[1:]))
	s.askCost = math.Float32frombits(binary.LittleEndian.Uint32(d.b[5:]))
	d.b = d.b[9:]
	if s.unitAsks == 0 {
		s.unit = 0
	}
	finite := !math.IsInf(float64(s.fitCost), 0) && !math.IsInf(float64(s.askCost), 0)
	if s.askN == 0 || !finite || !(s.fitCost >= 0 && s.askCost >= 0 && s.fitCost <= s.askCost*1.001+1) {
		// No ask seen, or infinite, NaN, negative, or a fit share over
		// 1: not what noteSparseAsk writes (an infinite pair made the
		// fit share NaN, and the view's held units absurd, which every
		// module refused).
		s.fitCost, s.askCost, s.askN = 0, 0, 0
	}
}

var errCorrupt = errors.New("merge: corrupt record")

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint(max uint64) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > max {
		d.err = errCorrupt
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (s *keyState) decode(b []byte, maxIsos int) error {
	if len(b) == 0 || b[0] != stateVer {
		return errCorrupt
	}
	d := decoder{b: b[1:]}
	s.win, s.count, s.prev, s.tat = d.varint(), d.varint(), d.varint(), d.varint()
	n := d.uvarint(uint64(maxIsos))
	s.isos = nil
	if n > 0 {
		s.isos = make([]isoState, 0, n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		l := d.uvarint(MaxScopedIDLen)
		if d.err != nil || uint64(len(d.b)) < l {
			return errCorrupt
		}
		is := isoState{id: string(d.b[:l])}
		d.b = d.b[l:]
		is.seen, is.lease, is.granted, is.leaseWin, is.demand, is.gap = d.varint(), d.varint(), d.varint(), d.varint(), d.varint(), d.varint()
		s.isos = append(s.isos, is)
	}
	if d.err == nil && len(d.b) > 0 { // records written before standing leases end here
		for i := range s.isos {
			is := &s.isos[i]
			is.stand, is.standRes, is.standUntil = d.varint(), d.varint(), d.varint()
		}
	}
	if d.err == nil && len(s.isos) > 0 && len(d.b) > 0 && d.b[0] == 'x' {
		d.b = d.b[1:]
		for i := range s.isos {
			s.isos[i].expires, s.isos[i].usable = d.varint(), d.varint()
		}
	}
	if d.err == nil && len(s.isos) > 0 {
		if len(d.b) > len(s.isos) && d.b[0] == 'n' {
			for i := range s.isos {
				s.isos[i].asks = min(d.b[1+i], measuredAsks)
			}
			d.b = d.b[1+len(s.isos):]
		} else {
			for i := range s.isos { // a record from before the count
				s.isos[i].asks = measuredAsks
			}
		}
	}
	s.readSection(&d, 'p', func(is *isoState) *int64 { return &is.prevRes })
	s.readSection(&d, 'v', func(is *isoState) *int64 { return &is.voidAt })
	s.readSection(&d, 'o', func(is *isoState) *int64 { return &is.owed })
	for i := range s.isos {
		s.isos[i].owed = max(s.isos[i].owed, 0) // never written negative
	}
	s.readCosts(&d)
	s.up = nil
	if d.err == nil && len(d.b) > 0 {
		s.decodeUp(&d)
	}
	return d.err
}

func (h *hwmState) encode(dst []byte) []byte {
	dst = append(dst, stateVer)
	dst = binary.AppendVarint(dst, h.seq)
	dst = binary.AppendVarint(dst, h.seen)
	dst = binary.AppendUvarint(dst, h.sum)
	if h.secret != ([16]byte{}) {
		dst = append(dst, h.secret[:]...)
	}
	return dst
}

func (h *hwmState) decode(b []byte) error {
	if len(b) == 0 || b[0] != stateVer {
		return errCorrupt
	}
	d := decoder{b: b[1:]}
	h.seq, h.seen = d.varint(), d.varint()
	h.sum, h.secret = 0, [16]byte{}
	if d.err == nil && len(d.b) > 0 { // records written before the digest end here
		h.sum = d.uvarint(^uint64(0))
	}
	if d.err == nil && len(d.b) > 0 { // records of isolates without a secret end here
		if len(d.b) != len(h.secret) {
			return errCorrupt
		}
		copy(h.secret[:], d.b)
	}
	return d.err
}

// iso returns the isolate's entry for this key, adding one when there is
// room (at most maxPerKey entries; stale entries without an active lease are
// evicted first). It returns nil when the isolate cannot be tracked.
func (s *keyState) iso(id string, now, activeWin int64, maxPerKey int, room func() bool) *isoState {
	if i := s.findIso(id); i >= 0 {
		return &s.isos[i]
	}
	if len(s.isos) >= maxPerKey || !room() {
		// Evict the least recently seen isolate that holds no active lease.
		victim, oldest := -1, int64(math.MaxInt64)
		for i := range s.isos {
			if !s.leaseActive(&s.isos[i], activeWin, now) && s.isos[i].seen < oldest {
				victim, oldest = i, s.isos[i].seen
			}
		}
		if victim < 0 {
			return nil
		}
		s.noteDropped(&s.isos[victim], now)
		s.isos[victim] = isoState{id: id, seen: now, gap: s.lim.Period}
		s.oldest = min(s.oldest, now)
		return &s.isos[victim]
	}
	s.isos = append(s.isos, isoState{id: id, seen: now, gap: s.lim.Period})
	s.oldest = min(s.oldest, now)
	return &s.isos[len(s.isos)-1]
}

func newKeyState(lim *wire.LimiterConfig, skey string) *keyState {
	return &keyState{lim: lim, skey: skey, oldest: math.MinInt64}
}

// findIso returns the index of the isolate's entry, or -1. The Merger
// passes the same string for every batch of an isolate, so the entry is
// usually found by comparing string pointers; the full comparison only runs
// when that fails (a new isolate for the key, or entries read from the
// Store), and the found entry then takes id's string.
func (s *keyState) findIso(id string) int {
	p := unsafe.StringData(id)
	for i := range s.isos {
		if unsafe.StringData(s.isos[i].id) == p && len(s.isos[i].id) == len(id) {
			return i
		}
	}
	for i := range s.isos {
		if s.isos[i].id == id {
			s.isos[i].id = id
			return i
		}
	}
	return -1
}

// recentIsolates returns how many isolates were seen within 2 periods
// (approximate limiters: in this period and the previous one, estimated).
func (s *keyState) recentIsolates(now int64) int64 {
	if !s.lim.Leased() {
		return s.sk.count(limitmath.Window(now, s.lim.Period))
	}
	horizon := now - 2*s.lim.Period
	if s.oldest >= horizon {
		return int64(len(s.isos))
	}
	n := int64(0)
	for i := range s.isos {
		if s.isos[i].seen >= horizon {
			n++
		}
	}
	return n
}

// leaseActive reports whether is holds a lease that still counts against the
// key's budget at now: any positive lease for buckets; for windowed
// limiters a reservation in window activeWin or (standing leases) the next
// one.
func (s *keyState) leaseActive(is *isoState, activeWin, now int64) bool {
	if s.lim.IsBucket() {
		return s.reservation(is, 0, now) > 0
	}
	return s.reservation(is, activeWin, now) > 0 || s.reservation(is, activeWin+1, now) > 0
}

// reservation returns the budget of window W reserved for is at now: its
// lease for W, or, for the window of its standing lease, that. Once the
// lease has expired (now >= expires), the isolate may have spent it
// without reporting (it died): what it held for a window that began while
// the lease was alive stays reserved, as spent, until that window ends;
// what it held for a later window, which it could not have used, is given
// back (see lease.go).
func (s *keyState) reservation(is *isoState, W, now int64) int64 {
	switch {
	case is.expires != 0 && now >= is.expires && !s.lim.IsBucket() && W*s.lim.Period >= is.usable:
		return 0
	case s.lim.IsBucket(), is.leaseWin == W:
		return max(is.lease, 0)
	case is.leaseWin == W+1 && s.lim.Algorithm == wire.SlidingWindow:
		return max(is.prevRes, 0)
	case is.leaseWin < W && W <= is.standUntil:
		return max(is.standRes, 0)
	}
	return 0
}

// held returns the budget of window W that the isolates other than me
// (nil: every isolate) have probably admitted and not reported
// (wire.View.Held): what they held in leases now expired (reservation
// keeps them as spent until the window ends or the isolate reports), and
// of their live leases what their pace says they used since they were
// last heard from (heldOutlook's spent, as grantWindow's room counts it),
// and what its last grant gave for requests it held.
// Not the whole of the live leases: most of what an isolate holds ahead
// is unused, and its next batch reports what it admitted (counted in
// whole, a key 30 of 100 spent read 63 remaining where 70 were left).
// Without the pace, cost admitted under live leases and reported lazily
// was missing: an isolate that had admitted 7 of a 10/minute key under
// its lease left another's peek at 4 where 3 were left.
//
// It also returns the others' pace: the cost per period they are expected
// to admit, each at the pace its silence allows (paceSince), for the
// view's Pace.
func (s *keyState) held(me *isoState, W, now int64) (held int64, pace float64) {
	var n int64
	var spent float64
	P := s.lim.Period
	unit, fit := s.costUnit(), s.fitShare()
	for i := range s.isos {
		is := &s.isos[i]
		if is == me {
			continue
		}
		pace += paceSince(is, P, now)
		r := s.reservation(is, W, now)
		switch {
		case r == 0:
		case is.expires != 0 && now >= is.expires:
			n = addSat(n, r)
		default:
			// What its last grant gave for the requests it held (owed)
			// it admitted when the reply came.
			o := int64(0)
			if is.leaseWin == W {
				o = min(max(is.owed, 0), r)
			}
			lam := is.perWindow(P)
			if r-o <= unit {
				lam *= fit
			}
			sp, _ := heldOutlook(is, r-o, lam, W, P, now, unit)
			spent += float64(o) + sp
		}
	}
	return addSat(n, int64(math.Round(spent))), pace
}

// tellHeld sets v's Held (and, to a batch that reads it, Pace) for the
// view of window W told to me (nil: an isolate without an entry).
func (m *Merger) tellHeld(st *keyState, me *isoState, W, now int64, v *wire.View) {
	held, pace := st.held(me, W, now)
	v.Held = held
	if m.pace {
		v.Pace = int64(math.Round(min(pace, float64(wire.MaxLimit))))
	}
}

// prune drops isolates not seen within keep (Merger.keepFor: at least 2
// periods) that hold no active lease (a bucket lease stays active until
// used: the isolate may spend it at any time, so forgetting it would give
// its reservation to others twice), and returns how many it dropped. An
// isolate not seen for 2 periods, kept or not, makes its observation of
// carry.go then (it stopped), as a dropped one did.
func (s *keyState) prune(now, keep int64) int {
	quiet := now - 2*s.lim.Period
	if s.oldest >= quiet {
		return 0 // every isolate was seen within 2 periods
	}
	horizon := now - keep
	w := limitmath.Window(now, s.lim.Period)
	if !s.lim.IsBucket() && s.win > w {
		w = s.win
	}
	n := 0
	oldest := int64(math.MaxInt64)
	for i := range s.isos {
		is := s.isos[i]
		if is.seen < quiet {
			s.noteDropped(&is, now)
			is.reqAfter = 0 // observed: its next request observes nothing
		}
		if is.seen < horizon && !s.leaseActive(&is, w, now) {
			continue
		}
		oldest = min(oldest, is.seen)
		s.isos[n] = is
		n++
	}
	if n == 0 {
		oldest = now // entries added later are seen at >= now
	}
	s.oldest = oldest
	dropped := len(s.isos) - n
	clear(s.isos[n:])
	s.isos = s.isos[:n]
	return dropped
}

// windowCounts returns the counts of window w and w-1.
func (s *keyState) windowCounts(w int64) (count, prev int64) {
	return limitmath.Counts(s.win, s.count, s.prev, w)
}
