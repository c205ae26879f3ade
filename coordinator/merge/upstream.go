package merge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/edgelimit/edgelimit/wasm/limitmath"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// keyUpstream is what the coordinator knows of one key's upstream, merged
// from the isolates' signals (wire.Signal) and sent back to every isolate
// that syncs the key (wire.UpView): a pause (the latest end any isolate
// was asked for: merged as the maximum), the fleet's circuit (one probe at
// a time), and the limits the upstream announced, per reporting isolate.
// Few keys have one; keyState.up is nil for the rest.
type keyUpstream struct {
	pause      int64 // coordinator ns until which the key is paused
	circuit    uint8 // wire.CircuitClosed, CircuitOpen or CircuitHalfOpen
	opens      uint8 // consecutive openings: the open time doubles with each
	fails      int64 // consecutive failures reported while closed
	failAt     int64 // coordinator ns of the last failure counted in fails
	openUntil  int64 // ns: an open circuit turns half-open then
	probeIso   string
	probeUntil int64      // ns: the probe's grant lapses then
	reps       []upReport // announced limits, one per isolate, at most maxReporters
}

// upReport is one isolate incarnation's latest announced limit.
type upReport struct {
	hash  uint64 // isoHash of the isolate (its id in its token's namespace)
	limit int64
	seen  int64  // coordinator ns
	tok   uint64 // the reporter's token (Merger.reportToken); 0: one trusted fleet
}

// maxReporters bounds the announced limits kept per key: a report of the
// token with the most makes room (evictee).
const maxReporters = 8

// evictee returns the index of the report that makes room for a new one
// when u holds maxReporters: the oldest of the token that holds the most
// (the oldest of all when the tokens hold as many). So one token's
// isolates, however many ids they sync under, displace only their own
// reports once they hold the most, and the other tokens keep their votes
// (agreedLimit). Before, the oldest report went whatever its token: one
// token's 8 fresh isolate ids pushed out two other tokens' agreed limit of
// 5, and the key went back to the configured 100.
func (u *keyUpstream) evictee() int {
	var n [maxReporters]int // reports per token, by index of the token's first report
	most := 0
	for i := range u.reps {
		f := slices.IndexFunc(u.reps[:i+1], func(r upReport) bool { return r.tok == u.reps[i].tok })
		n[f]++
		most = max(most, n[f])
	}
	ev := -1
	for i := range u.reps {
		f := slices.IndexFunc(u.reps[:i+1], func(r upReport) bool { return r.tok == u.reps[i].tok })
		if n[f] == most && (ev < 0 || u.reps[i].seen < u.reps[ev].seen) {
			ev = i
		}
	}
	return ev
}

// reportHorizon is how long an announced limit counts: ten periods, at
// least a minute.
func reportHorizon(lim *wire.LimiterConfig) int64 { return max(10*lim.Period, 60e9) }

// agreedLimit is the limit the fleet's upstream announced, 0 when none is
// agreed: with reports from at least two isolates within the horizon, the
// upper median of their limits (one isolate cannot lower the fleet's limit
// alone; any two honest ones bound it), or the only report when the key has
// one recent isolate. With several tokens (reports with a token), tokens
// vote rather than isolates: each token's vote is the upper median of its
// isolates' reports, and the agreed limit the upper median of two or more
// tokens' votes; one token's reports alone agree (as above) only for a
// leased key whose recent isolates are all that token's. One token's
// clients thus cannot lower the limit other tokens' isolates get. It never
// exceeds the limiter's cap for key.
func (s *keyState) agreedLimit(key string, now int64) int64 {
	u := s.up
	if u == nil || len(u.reps) == 0 {
		return 0
	}
	horizon := now - reportHorizon(s.lim)
	var recent [maxReporters]upReport
	n := 0
	for _, r := range u.reps {
		if r.seen >= horizon && n < len(recent) {
			recent[n] = r
			n++
		}
	}
	if n == 0 {
		return 0
	}
	rs := recent[:n]
	slices.SortFunc(rs, func(a, b upReport) int { return cmpInt(a.tok, b.tok) })
	var votes [maxReporters]int64
	nv := 0
	for i := 0; i < n; {
		j := i
		for j < n && rs[j].tok == rs[i].tok {
			j++
		}
		votes[nv] = upperMedian(rs[i:j])
		nv++
		i = j
	}
	var agreed int64
	switch {
	case nv >= 2:
		slices.Sort(votes[:nv])
		agreed = votes[nv/2]
	case n == 1 && s.recentIsolates(now) > 1:
		return 0
	case rs[0].tok != 0 && !s.onlyToken(rs[0].tok, now):
		return 0
	default:
		agreed = votes[0]
	}
	return min(agreed, s.lim.AnnouncedCap(s.lim.LimitFor(key)))
}

// upperMedian returns the upper median of the limits of rs (not empty).
func upperMedian(rs []upReport) int64 {
	var ls [maxReporters]int64
	for i, r := range rs {
		ls[i] = r.limit
	}
	slices.Sort(ls[:len(rs)])
	return ls[len(rs)/2]
}

func cmpInt(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// onlyToken reports whether every isolate that recently synced s is of the
// token tok (Merger.reportToken). Only leased keys know their isolates by
// id; for the others it is false.
func (s *keyState) onlyToken(tok uint64, now int64) bool {
	if !s.lim.Leased() {
		return false
	}
	horizon := now - 2*s.lim.Period
	for i := range s.isos {
		is := &s.isos[i]
		if is.seen >= horizon && (len(is.id) < ScopeLen || isoHash(is.id[:ScopeLen]) != tok) {
			return false
		}
	}
	return true
}

// limitFor is the limit the coordinator applies to key now: the agreed
// announced limit when there is one, else the configured one.
func (s *keyState) limitFor(key string, now int64) int64 {
	if a := s.agreedLimit(key, now); a > 0 {
		return a
	}
	return s.lim.LimitFor(key)
}

// upActive reports whether st's upstream state still says something at
// now (so it is kept, sent to isolates and not garbage-collected).
func (s *keyState) upActive(now int64) bool {
	u := s.up
	if u == nil {
		return false
	}
	horizon := now - reportHorizon(s.lim)
	if u.pause > now || u.circuit != wire.CircuitClosed || u.fails > 0 && u.failAt >= horizon {
		return true
	}
	for _, r := range u.reps {
		if r.seen >= horizon {
			return true
		}
	}
	return false
}

// upUntil is a time (coordinator ns) after which st's upstream state no
// longer matters, for stores that expire records by TTL: the pause's end,
// the announced limits' horizon and, while the circuit is not closed, its
// open time and probe grant plus the longest pause honoured (a half-open
// circuit nobody probes is then forgotten, that is closed).
func (s *keyState) upUntil() int64 {
	u := s.up
	if u == nil {
		return 0
	}
	until := u.pause
	for _, r := range u.reps {
		until = max(until, addSat(r.seen, reportHorizon(s.lim)))
	}
	if u.circuit != wire.CircuitClosed {
		until = max(until, addSat(max(u.openUntil, u.probeUntil), s.lim.PauseCap()))
	}
	if u.fails > 0 {
		until = max(until, addSat(u.failAt, reportHorizon(s.lim)))
	}
	return until
}

// openFor is how long the circuit stays open after its n-th consecutive
// opening: the limiter's base doubled n times, between half and all of it
// (jitter drawn from seed).
//
// It is at most 372 days (12 times wire.MaxPeriod), the longest open time
// the module takes in a reply (it refuses the whole reply otherwise): a
// circuit_open of 31 days doubled 6 times would be 1,984.
func openFor(lim *wire.LimiterConfig, n uint8, seed uint64) int64 {
	return min(limitmath.Backoff(lim.CircuitBase(), n, wire.MaxCircuitDoublings, seed), wire.MaxPeriod*12)
}

func (u *keyUpstream) open(lim *wire.LimiterConfig, seed uint64, now int64) {
	u.circuit, u.probeIso, u.probeUntil = wire.CircuitOpen, "", 0
	u.openUntil = now + openFor(lim, u.opens, seed^uint64(now))
	u.fails = 0
	if u.opens < 255 {
		u.opens++
	}
}

// Who may signal. Only limiters with an upstream configuration
// (wire.UpstreamConfig, "upstream" in the config file) take signals: the
// others' are ignored and counted (MergeStats.SignalsIgnored; a 4xx would
// refuse the whole batch, its deltas with it, and the isolate would resend
// it forever). A pause is capped by the limiter's upstream.max_pause
// (default 1 h: wire.LimiterConfig.PauseCap). Announced limits are kept
// per isolate incarnation (its id in its token's namespace, bound to the
// incarnation by its secret: sequence.go) and, with
// MergerOptions.ReportPerScope (several tokens may sync), counted per
// token (agreedLimit): a client cannot make itself several voters by
// making up isolate ids, and one token cannot lower the limit another
// token's isolates get. At most maxReporters reports are kept per key.

// reportToken is the token an announced limit from an isolate of scope
// counts for (see above): isoHash(scope) with ReportPerScope, else 0 (one
// trusted fleet).
func (m *Merger) reportToken(scope string) uint64 {
	if m.opts.ReportPerScope && scope != "" {
		return isoHash(scope)
	}
	return 0
}

// applySignal merges one isolate's signal into st at now: the pause ends
// at the latest, failures open the circuit (or reopen it when they answer
// the isolate's probe), a success of the probe closes it, a probe request
// is granted when no other isolate holds the probe, and an announced
// limit is recorded for the isolate, with its token tok
// (Merger.reportToken).
func (m *Merger) applySignal(st *keyState, isolate string, hash, tok uint64, sg *wire.Signal, now int64) {
	m.markKey(st)
	lim := st.lim
	if st.up == nil {
		st.up = &keyUpstream{}
	}
	u := st.up
	if sg.Pause > 0 {
		u.pause = max(u.pause, now+min(sg.Pause, lim.PauseCap()))
	}
	if u.circuit == wire.CircuitOpen && now >= u.openUntil {
		u.circuit = wire.CircuitHalfOpen
	}
	if u.fails > 0 && u.failAt < now-reportHorizon(lim) {
		u.fails = 0 // failures that long apart are not consecutive
	}
	probe := u.circuit == wire.CircuitHalfOpen && u.probeIso == isolate
	seed := hash ^ limitmath.Mix64(uint64(len(st.skey)))
	switch {
	case sg.Successes > 0 && probe:
		u.circuit, u.opens, u.fails, u.probeIso, u.probeUntil = wire.CircuitClosed, 0, 0, "", 0
	case sg.Successes > 0 && u.circuit == wire.CircuitClosed:
		u.fails, u.failAt = sg.Failures, now
	case sg.Failures > 0 && probe:
		u.open(lim, seed, now)
	case sg.Failures > 0 && u.circuit == wire.CircuitClosed:
		u.fails = addSat(u.fails, sg.Failures)
		u.failAt = now
	}
	if t := lim.CircuitThreshold(); u.circuit == wire.CircuitClosed && t > 0 && u.fails >= t {
		u.open(lim, seed, now)
	}
	if sg.Probe && u.circuit == wire.CircuitHalfOpen && (u.probeIso == "" || now >= u.probeUntil) {
		u.probeIso = isolate
		u.probeUntil = now + 2*(lim.CircuitBase()<<min(u.opens, wire.MaxCircuitDoublings))
	}
	if sg.Limit > 0 {
		l := min(sg.Limit, lim.AnnouncedCap(lim.LimitFor(sg.Key)))
		i := slices.IndexFunc(u.reps, func(r upReport) bool { return r.hash == hash })
		switch {
		case i >= 0:
			u.reps[i] = upReport{hash, l, now, tok}
		case len(u.reps) < maxReporters:
			u.reps = append(u.reps, upReport{hash, l, now, tok})
		default:
			u.reps[u.evictee()] = upReport{hash, l, now, tok}
		}
	}
}

// addUpView appends st's upstream view for isolate to rp when st still
// has upstream state at now (else it forgets it), or always when always
// (the isolate sent a signal for the key: it hears back, if only that the
// circuit is closed).
func (m *Merger) addUpView(rp *wire.Reply, st *keyState, key, isolate string, now int64, always bool) {
	if !st.upActive(now) {
		if st.up != nil {
			st.up = nil
			m.markKey(st)
		}
		if !always {
			return
		}
	}
	rp.Upstream = append(rp.Upstream, wire.UpView{})
	st.upView(key, isolate, now, &rp.Upstream[len(rp.Upstream)-1])
}

// upView fills v with st's upstream state for isolate at now.
func (st *keyState) upView(key, isolate string, now int64, v *wire.UpView) {
	*v = wire.UpView{Limiter: st.lim.Name, Key: key}
	u := st.up
	if u == nil {
		return
	}
	v.Pause = max(u.pause-now, 0)
	v.Circuit = int64(u.circuit)
	if u.circuit == wire.CircuitOpen {
		if now < u.openUntil {
			v.Open = u.openUntil - now
		} else {
			v.Circuit = wire.CircuitHalfOpen
		}
	}
	v.Probe = v.Circuit == wire.CircuitHalfOpen && u.probeIso == isolate && now < u.probeUntil
	v.Limit = st.agreedLimit(key, now)
	if v.Limit > 0 {
		v.Life = st.limitLife(now)
	}
}

// limitLife is how long the agreed limit stands at now if no report
// arrives: until the oldest report it rests on leaves the horizon (the
// agreement may change then), ns, at least 1.
func (st *keyState) limitLife(now int64) int64 {
	h := reportHorizon(st.lim)
	until := int64(0)
	for _, r := range st.up.reps {
		if t := addSat(r.seen, h); t > now && (until == 0 || t < until) {
			until = t
		}
	}
	return max(until-now, 1)
}

// encodeUp appends st's upstream section ('u' and its fields) when it has
// one; records without one end before it.
func (s *keyState) encodeUp(dst []byte) []byte {
	u := s.up
	if u == nil {
		return dst
	}
	dst = append(dst, 'u')
	dst = binary.AppendVarint(dst, u.pause)
	dst = append(dst, u.circuit, u.opens)
	dst = binary.AppendVarint(dst, u.fails)
	dst = binary.AppendVarint(dst, u.openUntil)
	dst = binary.AppendUvarint(dst, uint64(len(u.probeIso)))
	dst = append(dst, u.probeIso...)
	dst = binary.AppendVarint(dst, u.probeUntil)
	dst = binary.AppendUvarint(dst, uint64(len(u.reps)))
	for _, r := range u.reps {
		dst = binary.AppendUvarint(dst, r.hash)
		dst = binary.AppendVarint(dst, r.limit)
		dst = binary.AppendVarint(dst, r.seen)
	}
	dst = binary.AppendVarint(dst, u.failAt)
	// The reports' tokens, when any has one (records written before
	// tokens voted end before them: every token 0).
	if slices.ContainsFunc(u.reps, func(r upReport) bool { return r.tok != 0 }) {
		for _, r := range u.reps {
			dst = binary.AppendUvarint(dst, r.tok)
		}
	}
	return dst
}

// decodeUp reads the upstream section written by encodeUp.
func (s *keyState) decodeUp(d *decoder) {
	if len(d.b) < 3 || d.b[0] != 'u' {
		d.err = errCorrupt
		return
	}
	u := &keyUpstream{}
	d.b = d.b[1:]
	u.pause = d.varint()
	if d.err != nil || len(d.b) < 2 {
		d.err = errCorrupt
		return
	}
	u.circuit, u.opens = d.b[0], d.b[1]
	d.b = d.b[2:]
	if u.circuit > wire.CircuitHalfOpen {
		d.err = errCorrupt
		return
	}
	u.fails, u.openUntil = d.varint(), d.varint()
	l := d.uvarint(MaxScopedIDLen)
	if d.err != nil || uint64(len(d.b)) < l {
		d.err = errCorrupt
		return
	}
	u.probeIso = string(d.b[:l])
	d.b = d.b[l:]
	u.probeUntil = d.varint()
	n := d.uvarint(maxReporters)
	for i := uint64(0); i < n && d.err == nil; i++ {
		u.reps = append(u.reps, upReport{hash: d.uvarint(^uint64(0)), limit: d.varint(), seen: d.varint()})
	}
	if d.err == nil && len(d.b) > 0 {
		u.failAt = d.varint()
	}
	if d.err == nil && len(d.b) > 0 {
		for i := range u.reps {
			u.reps[i].tok = d.uvarint(^uint64(0))
		}
	}
	if d.err == nil {
		s.up = u
	}
}

// Pause pauses (limiter, key) for d ns from now, as an operator (the
// coordinator's admin role) rather than an upstream asks: every isolate
// that syncs the key hears the pause with its reply and denies the key
// until it ends. d is capped by the limiter's PauseCap (upstream.max_pause,
// default 1 h); a pause already set longer stays (pauses merge as the
// latest end; Reset lifts it). It returns the pause left, ns, and stages
// the change for the next Commit.
func (m *Merger) Pause(limiter, key string, d, now int64) (int64, error) {
	lim := m.lims[limiter]
	if lim == nil {
		return 0, fmt.Errorf("%w %q", ErrUnknownLimiter, limiter)
	}
	if d <= 0 {
		return 0, errors.New("merge: a pause must be longer than 0")
	}
	if err := m.recovered(); err != nil {
		return 0, err
	}
	st, err := m.loadKey(lim, key, nil, 0, now)
	if err != nil {
		return 0, err
	}
	m.markKey(st)
	if st.up == nil {
		st.up = &keyUpstream{}
	}
	st.up.pause = max(st.up.pause, now+min(d, lim.PauseCap()))
	return st.up.pause - now, nil
}
