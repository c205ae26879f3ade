package limitmath

// Window returns the index of the window of length period (ns, > 0) that
// holds time now (ns, >= 0).
func Window(now, period int64) int64 { return now / period }

// Roll moves a two-window counter (cur counted in window win, prev in
// win-1) forward to window w: one window on, cur becomes prev; further, both
// are empty. A w before win changes nothing (windows never move back).
func Roll(win, cur, prev, w int64) (int64, int64, int64) {
	switch {
	case w <= win:
		return win, cur, prev
	case w == win+1:
		return w, 0, cur
	}
	return w, 0, 0
}

// Counts returns what a two-window counter (cur in window win, prev in
// win-1) says of windows w and w-1.
func Counts(win, cur, prev, w int64) (curW, prevW int64) {
	switch w {
	case win:
		return cur, prev
	case win + 1:
		return 0, cur
	case win - 1:
		return prev, 0
	}
	return 0, 0
}

// AdvanceTAT returns the theoretical arrival time of a bucket (limit per
// period) after a cost admitted at now: the bucket refills one unit per
// period/limit ns, so the cost moves the TAT, taken no earlier than now,
// by cost*period/limit (saturating).
func AdvanceTAT(tat, now, cost, period, limit int64) int64 {
	return AddSat(max(tat, now), MulDiv(cost, period, limit))
}

// Backoff returns a jittered exponential backoff: base doubled n times
// (at most maxDoublings), then a point in its upper half drawn from seed,
// so that isolates and coordinators that back off together spread out.
func Backoff(base int64, n, maxDoublings uint8, seed uint64) int64 {
	b := base << min(n, maxDoublings)
	return b/2 + int64(Mix64(seed)%uint64(b/2+1))
}

// Mix64 is SplitMix64's finaliser: a well-spread 64-bit hash of x.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
