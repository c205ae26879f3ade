package history

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// DefaultKeysPerLimiter is how many keys of each limiter the Recorder keeps
// a history and a last view of by default: 1000.
const DefaultKeysPerLimiter = 1000

// EvictIdle is how long a kept key must have gone unreported before a new
// key may take its place when its limiter's keys are all kept: 24 h. A
// flood of new keys therefore never pushes out the history of keys in use.
const EvictIdle = int64(24 * time.Hour)

// MaxPending bounds what waits in memory while the store refuses writes:
// at most this many series-minutes (262,144: about 4 h of 1000 keys, some
// 30 MB), and at most a day of minutes; the oldest minutes are dropped
// first, and counted (Stats.Dropped).
const MaxPending = 1 << 18

// Recorder aggregates, in memory, what the merge applies (it is a
// merge.Observer) into the current minute's counts per limiter and per
// kept key, and writes them to its Store every 10 s, once the minute is
// over (Tick, Flush) and at a graceful stop (Stop): at most six writes per
// series per minute, whatever the number of syncs. It keeps at most keysPerLimiter
// keys per limiter (the kept keys: their history and last view); a key
// reported when they are all kept replaces the least recently reported
// one only if that one has been idle for EvictIdle, else it is not kept
// (Stats.Untracked). Its methods are safe for concurrent use.
type Recorder struct {
	store Store
	cap   int
	id    string // random, names this Recorder's writes
	seq   int64  // writes sealed (r.mu)

	mu        sync.Mutex
	lims      map[string]*limRec
	order     []*limRec
	minute    int64 // the Minute bucket of the current counts; -1 before the first
	sealedAt  int64 // when Tick last sealed the current counts, ns (sealEvery)
	sealed    []*sealedMinute
	untracked int64 // reports of keys not kept (bound reached)
	dropped   int64 // minutes dropped while the store refused writes
	writeErrs int64
	lastErr   string

	flushMu     sync.Mutex // one Flush at a time
	trimmedHour int64      // the Hour bucket of the last trim
}

// limRec is what the Recorder keeps of one limiter.
type limRec struct {
	name       string
	total      Counts // current minute
	keys       map[string]*keptKey
	gone       []string // keys evicted since the last seal
	fullMinute int64    // the minute in which no kept key could be evicted
}

// keptKey is one kept key: its last view and its current minute's counts.
type keptKey struct {
	Kept
	cur   Counts
	dirty bool // the view changed since the last seal
}

// sealedMinute is a minute over, waiting to be written.
type sealedMinute struct {
	id     string // the write's id (Store.AddHistory)
	minute int64
	pts    []Point // Minute points
	kept   map[string][]Kept
	gone   map[string][]string
}

// NewRecorder returns a Recorder of the limiters of cfg over store,
// keeping keysPerLimiter keys per limiter (0: DefaultKeysPerLimiter;
// negative: none, the limiters' totals only).
func NewRecorder(cfg wire.Config, store Store, keysPerLimiter int) *Recorder {
	if keysPerLimiter == 0 {
		keysPerLimiter = DefaultKeysPerLimiter
	}
	var id [8]byte
	rand.Read(id[:])
	r := &Recorder{store: store, cap: max(keysPerLimiter, 0), id: hex.EncodeToString(id[:]), lims: map[string]*limRec{},
		minute: -1, trimmedHour: -1}
	for i := range cfg.Limiters {
		l := &limRec{name: cfg.Limiters[i].Name, keys: map[string]*keptKey{}, fullMinute: -1}
		r.lims[l.name] = l
		r.order = append(r.order, l)
	}
	return r
}

// Load reads the kept keys stored by earlier runs (and, in Redis mode,
// by the other coordinators), at most the bound per limiter (the most
// recently reported first), and returns them per limiter: what the
// dashboard shows before the keys sync again.
func (r *Recorder) Load() (map[string][]Kept, error) {
	out := map[string][]Kept{}
	for _, l := range r.order {
		ks, err := r.store.LoadKept(l.name)
		if err != nil {
			return nil, fmt.Errorf("history: load kept keys of %q: %w", l.name, err)
		}
		sort.Slice(ks, func(i, j int) bool { return ks[i].Seen > ks[j].Seen })
		ks = ks[:min(len(ks), r.cap)]
		r.mu.Lock()
		for _, k := range ks {
			if _, ok := l.keys[k.Key]; !ok {
				l.keys[k.Key] = &keptKey{Kept: k}
			}
		}
		r.mu.Unlock()
		out[l.name] = ks
	}
	return out, nil
}

// Applied implements merge.Observer: it adds b's cost to the current
// minute (denied cost of a key that rp says is paused or has an open
// circuit counts as paused) and notes the views of rp's keys.
func (r *Recorder) Applied(b *wire.Batch, rp *wire.Reply, now int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.roll(now)
	var paused map[[2]string]bool
	for i := range rp.Upstream {
		u := &rp.Upstream[i]
		if u.Pause > 0 || u.Circuit == wire.CircuitOpen {
			if paused == nil {
				paused = map[[2]string]bool{}
			}
			paused[[2]string{u.Limiter, u.Key}] = true
		}
	}
	add := func(limiter, key string, c Counts) {
		l := r.lims[limiter]
		if l == nil {
			return
		}
		l.total.Add(c)
		if k := r.keep(l, key, now); k != nil {
			k.cur.Add(c)
			k.Seen = now
		}
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		add(e.Limiter, e.Key, Counts{Admitted: max(e.Delta, 0)})
	}
	b.EachDenial(func(limiter, key string, _, cost int64) {
		if paused[[2]string{limiter, key}] {
			add(limiter, key, Counts{Paused: cost})
		} else {
			add(limiter, key, Counts{Denied: cost})
		}
	})
	for i := range rp.Entries {
		v := &rp.Entries[i]
		l := r.lims[v.Limiter]
		if l == nil {
			continue
		}
		if k := r.keep(l, v.Key, now); k != nil {
			k.Window, k.Count, k.Prev, k.TAT, k.At, k.Seen = v.Window, v.Count, v.Prev, v.TAT, now, now
			k.dirty = true
		}
	}
}

// keep returns the kept key of l named key, making it kept if the bound
// allows (see Recorder), or nil.
func (r *Recorder) keep(l *limRec, key string, now int64) *keptKey {
	if k := l.keys[key]; k != nil {
		return k
	}
	if r.cap == 0 {
		return nil
	}
	if len(l.keys) >= r.cap {
		if l.fullMinute == r.minute {
			r.untracked++
			return nil
		}
		var old *keptKey
		for _, k := range l.keys {
			if old == nil || k.Seen < old.Seen {
				old = k
			}
		}
		if old == nil || old.Seen > now-EvictIdle {
			l.fullMinute = r.minute // no other search this minute: O(keys) once
			r.untracked++
			return nil
		}
		delete(l.keys, old.Key)
		l.gone = append(l.gone, old.Key)
	}
	k := &keptKey{Kept: Kept{Key: strings.Clone(key), Seen: now}}
	l.keys[k.Key] = k
	return k
}

// Forget clears the last view of (limiter, key) after a reset: it no
// longer holds. The key stays kept, and its history stays.
func (r *Recorder) Forget(limiter, key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.lims[limiter]; l != nil {
		if k := l.keys[key]; k != nil {
			k.Window, k.Count, k.Prev, k.TAT, k.dirty = 0, 0, 0, 0, true
		}
	}
}

// roll seals the current minute when now is in a later one (r.mu held).
func (r *Recorder) roll(now int64) {
	m := Minute.Bucket(now)
	if m <= r.minute {
		return
	}
	if r.minute >= 0 {
		r.seal()
	}
	r.minute = m
}

// seal moves the current minute's counts, changed views and evictions to
// r.sealed (r.mu held).
func (r *Recorder) seal() {
	r.seq++
	s := &sealedMinute{id: r.id + "." + strconv.FormatInt(r.seq, 10), minute: r.minute, kept: map[string][]Kept{}, gone: map[string][]string{}}
	for _, l := range r.order {
		if !l.total.Zero() {
			s.pts = append(s.pts, Point{Res: Minute, Bucket: r.minute, Series: Series{Limiter: l.name, Total: true}, Counts: l.total})
			l.total = Counts{}
		}
		for _, k := range l.keys {
			if !k.cur.Zero() {
				s.pts = append(s.pts, Point{Res: Minute, Bucket: r.minute, Series: Series{Limiter: l.name, Key: k.Key}, Counts: k.cur})
				k.cur = Counts{}
			}
			if k.dirty {
				s.kept[l.name] = append(s.kept[l.name], k.Kept)
				k.dirty = false
			}
		}
		if len(l.gone) > 0 {
			gone := l.gone[:0:0]
			for _, g := range l.gone {
				if _, back := l.keys[g]; !back {
					gone = append(gone, g)
				}
			}
			if len(gone) > 0 {
				s.gone[l.name] = gone
			}
			l.gone = nil
		}
	}
	if len(s.pts) == 0 && len(s.kept) == 0 && len(s.gone) == 0 {
		return
	}
	r.sealed = append(r.sealed, s)
	r.bound()
}

// bound drops the oldest sealed minutes (or parts of minutes, Tick) past
// MaxPending series-minutes or a day of minutes (r.mu held).
func (r *Recorder) bound() {
	n := 0
	for _, s := range r.sealed {
		n += len(s.pts) + 1
	}
	for len(r.sealed) > 1 && (n > MaxPending || len(r.sealed) > MinuteBuckets*partsPerMinute) {
		n -= len(r.sealed[0].pts) + 1
		r.sealed = r.sealed[1:]
		r.dropped++
	}
}

// sealEvery is how often Tick seals the counts of the current minute so
// far, as a part of the minute (the store adds the parts): 10 s. A
// coordinator killed (kill -9, a panic) loses at most that much of the
// history and of the kept keys' views, not the minute (102,460
// acknowledged units of a minute were missing for good after one kill,
// and the dashboard's top keys showed counts of the minute before).
const sealEvery = 10 * time.Second

// partsPerMinute is how many parts Tick seals of a minute at most.
const partsPerMinute = int(time.Minute / sealEvery)

// Tick seals the current minute if now (ns) is past it, or the part of it
// since the last seal if that is sealEvery old. The coordinator calls it
// every second, then Flush.
func (r *Recorder) Tick(now int64) {
	r.mu.Lock()
	r.roll(now)
	if r.minute >= 0 && now-r.sealedAt >= int64(sealEvery) {
		r.seal()
		r.sealedAt = now
	}
	r.mu.Unlock()
}

// Stop seals the current minute however far it is (a graceful stop) and
// writes every minute not yet written (Flush).
func (r *Recorder) Stop(now int64) error {
	r.mu.Lock()
	r.roll(now)
	if r.minute >= 0 {
		r.seal()
	}
	r.mu.Unlock()
	return r.Flush(now)
}

// Flush writes the sealed minutes to the store: each series' minute
// bucket and the hour bucket holding it (added to what is stored), the
// changed views of kept keys and the evictions; and once per hour drops
// the buckets past their retention (so a store that does not expire them
// holds at most 24 h + 1 h of minutes and 30 days + 1 h of hours). Minutes the store refuses are kept
// for the next Flush (within MaxPending).
func (r *Recorder) Flush(now int64) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	todo := r.sealed
	r.sealed = nil
	r.mu.Unlock()
	for i, s := range todo {
		if err := r.write(s); err != nil {
			r.mu.Lock()
			r.sealed = append(todo[i:], r.sealed...)
			r.bound()
			r.writeErrs++
			r.lastErr = err.Error()
			r.mu.Unlock()
			return err
		}
	}
	if h := Hour.Bucket(now); h != r.trimmedHour {
		if err := r.store.TrimHistory(Minute, Minute.Bucket(now)-MinuteBuckets+1); err != nil {
			return fmt.Errorf("history: trim: %w", err)
		}
		if err := r.store.TrimHistory(Hour, h-HourBuckets+1); err != nil {
			return fmt.Errorf("history: trim: %w", err)
		}
		r.trimmedHour = h
	}
	return nil
}

// write stores one sealed minute.
func (r *Recorder) write(s *sealedMinute) error {
	if len(s.pts) > 0 {
		pts := make([]Point, 0, 2*len(s.pts))
		pts = append(pts, s.pts...)
		hour := s.minute * Minute.Width() / Hour.Width()
		for _, p := range s.pts {
			p.Res, p.Bucket = Hour, hour
			pts = append(pts, p)
		}
		if err := r.store.AddHistory(s.id, pts); err != nil {
			return fmt.Errorf("history: write minute %d: %w", s.minute, err)
		}
		s.pts = nil // written: a retry of this minute writes only what is left
	}
	for _, l := range r.order {
		if len(s.kept[l.name]) == 0 && len(s.gone[l.name]) == 0 {
			continue
		}
		if err := r.store.SaveKept(l.name, s.kept[l.name], s.gone[l.name]); err != nil {
			return fmt.Errorf("history: save kept keys of %q: %w", l.name, err)
		}
		delete(s.kept, l.name)
		delete(s.gone, l.name)
	}
	return nil
}

// Read returns the counts of s at res in buckets [from, to) (element i is
// bucket from+i): what the store holds plus what this Recorder has not
// written yet.
func (r *Recorder) Read(res Resolution, s Series, from, to int64) ([]Counts, error) {
	if err := CheckRange(res, from, to); err != nil {
		return nil, err
	}
	out, err := r.store.ReadHistory(res, s, from, to)
	if err != nil {
		return nil, fmt.Errorf("history: read: %w", err)
	}
	add := func(minute int64, c Counts) {
		b := minute
		if res == Hour {
			b = minute * Minute.Width() / Hour.Width()
		}
		if b >= from && b < to {
			out[b-from].Add(c)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sm := range r.sealed {
		for _, p := range sm.pts {
			if p.Series == s {
				add(sm.minute, p.Counts)
			}
		}
	}
	if l := r.lims[s.Limiter]; l != nil && r.minute >= 0 {
		if s.Total {
			add(r.minute, l.total)
		} else if k := l.keys[s.Key]; k != nil {
			add(r.minute, k.cur)
		}
	}
	return out, nil
}

// Search returns the kept keys of limiter whose name starts with prefix,
// by name, at most n, and how many match in all.
func (r *Recorder) Search(limiter, prefix string, n int) ([]Kept, int) {
	r.mu.Lock()
	l := r.lims[limiter]
	var out []Kept
	if l != nil {
		for k, kk := range l.keys {
			if strings.HasPrefix(k, prefix) {
				out = append(out, kk.Kept)
			}
		}
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	total := len(out)
	return out[:min(total, max(n, 0))], total
}

// Stats is the Recorder's bookkeeping.
type Stats struct {
	// KeysPerLimiter is the bound on kept keys per limiter.
	KeysPerLimiter int `json:"keys_per_limiter"`
	// Kept is the number of kept keys, all limiters.
	Kept int `json:"kept_keys"`
	// Untracked counts reports of keys that were not kept (bound reached).
	Untracked int64 `json:"untracked"`
	// Pending is the number of minutes not yet written.
	Pending int `json:"pending_minutes"`
	// Dropped counts minutes (or parts of minutes: Tick seals one every
	// 10 s) dropped unwritten because the store refused
	// writes for longer than MaxPending holds.
	Dropped int64 `json:"dropped_minutes"`
	// WriteErrors counts failed writes; LastError is the last one.
	WriteErrors int64  `json:"write_errors"`
	LastError   string `json:"last_error,omitempty"`
}

// Stats returns the Recorder's bookkeeping.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Stats{KeysPerLimiter: r.cap, Untracked: r.untracked, Pending: len(r.sealed), Dropped: r.dropped,
		WriteErrors: r.writeErrs, LastError: r.lastErr}
	for _, l := range r.order {
		s.Kept += len(l.keys)
	}
	return s
}
