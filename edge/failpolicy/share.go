package failpolicy

import "math"

// Quota is what a local share divides: one key's limit over the isolates
// that share it.
type Quota struct {
	// Limit is the key's limit per Period (overrides applied), >= 1.
	Limit int64
	// Period is the window the share counts in, ns (the limiter's period;
	// token buckets and GCRA count per period as well), >= 1.
	Period int64
	// Isolates is the number of isolates sharing the key; values below 1
	// count as 1.
	Isolates int64
}

// Share returns an isolate's share per window: max(Limit/Isolates, 1).
func (q Quota) Share() int64 {
	return max(q.Limit/max(q.Isolates, 1), 1)
}

// DefaultMaxKeys is the default cap on the keys a Share tracks: 100,000.
const DefaultMaxKeys = 100_000

// Share counts, per key and window, the cost one isolate admitted under
// LocalShare. K identifies a key: the host uses (limiter, key), the
// simulator its key ids. Memory is bounded by the key cap: keys of ended
// windows are dropped when the cap is reached, and a new key is denied
// while every tracked key's window is still running (failing safe under a
// flood of keys during an outage).
type Share[K comparable] struct {
	m    map[K]used
	max  int
	next int64 // no tracked window ends before next (ns): no sweep is worth it until then
}

// used is the cost taken in the window ending at end (ns).
type used struct {
	win, end, cost int64
}

// NewShare returns an empty Share that tracks at most maxKeys keys
// (DefaultMaxKeys when maxKeys <= 0). A caller with a known, bounded key
// set (the simulator) passes at least its size, so no key is refused for
// want of room.
func NewShare[K comparable](maxKeys int) *Share[K] {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	return &Share[K]{m: map[K]used{}, max: maxKeys}
}

// Len returns the number of keys tracked.
func (s *Share[K]) Len() int { return len(s.m) }

// Take reports whether cost fits what is left of key's share (q.Share())
// in the window of q.Period holding now (ns), and counts it if it does. A
// cost of 0 (a peek) always fits.
func (s *Share[K]) Take(key K, cost int64, q Quota, now int64) bool {
	period := max(q.Period, 1)
	w := now / period
	u, ok := s.m[key]
	if !ok && len(s.m) >= s.max && !s.sweep(now) {
		return false
	}
	if !ok || u.win != w {
		u = used{win: w, end: (w + 1) * period}
		if len(s.m) == 0 || u.end < s.next {
			s.next = u.end
		}
	}
	if u.cost+cost > q.Share() {
		s.m[key] = u
		return false
	}
	u.cost += cost
	s.m[key] = u
	return true
}

// Give returns cost taken by Take for key in the window holding now (a
// multi-limiter request that another check denied). It does nothing when
// the window has ended.
func (s *Share[K]) Give(key K, cost int64, q Quota, now int64) {
	u, ok := s.m[key]
	if !ok || u.win != now/max(q.Period, 1) {
		return
	}
	u.cost = max(u.cost-cost, 0)
	s.m[key] = u
}

// Remaining returns what is left of key's share in the window holding now.
func (s *Share[K]) Remaining(key K, q Quota, now int64) int64 {
	u, ok := s.m[key]
	if !ok || u.win != now/max(q.Period, 1) {
		return q.Share()
	}
	return max(q.Share()-u.cost, 0)
}

// sweep drops the keys whose window ended by now and reports whether room
// was made. It scans the map only once a tracked window has ended, so a
// flood of new keys against a full Share costs no scan per key.
func (s *Share[K]) sweep(now int64) bool {
	if now < s.next {
		return false
	}
	next := int64(math.MaxInt64)
	for k, u := range s.m {
		if u.end <= now {
			delete(s.m, k)
		} else {
			next = min(next, u.end)
		}
	}
	s.next = next
	return len(s.m) < s.max
}
