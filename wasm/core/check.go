package core

import (
	"errors"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Replies are checked against the isolate's own clock and configuration
// before anything of them is applied: a view with a window, count, TAT,
// lease or standing lease, or an upstream view with a pause, circuit or
// limit, that no honest coordinator could send to this isolate refuses
// the whole reply (ErrBadInput): the batch stays outstanding and is sent
// again, and the bad values never reach a key. The bounds are wide (a
// coordinator's clock may run ahead by viewSkew, a window may be
// overcommitted by many isolates); values inside them that are still
// wrong are replaced by the next honest reply (views replace, they do
// not merge by maximum), so no key stays wedged once honest replies
// resume.

// viewSkew is how far ahead of this isolate's clock a coordinator's
// views may be (its clock may run ahead; the coordinator bounds the
// other direction): 60 s.
const viewSkew = int64(60e9)

// overcommit bounds a view's count, as a multiple of the largest limit
// the isolate could apply to the key: isolates that each admit at most
// the limit per window.
const overcommit = 1 << 20

// errBadView is the cause of a refused reply.
var errBadView = errors.New("core: the reply holds a value this isolate could not have been sent")

// bound returns the largest limit, burst or lease the configuration of l
// allows for any key: the limit, every override, the upstream cap and
// the burst.
func bound(l *wire.LimiterConfig) int64 {
	b := max64(l.Limit, l.Burst)
	for _, o := range l.Overrides {
		b = max64(b, o.Limit)
	}
	if l.Upstream != nil {
		b = max64(b, l.Upstream.MaxLimit)
	}
	return b
}

// checkView reports whether v (for limiter l) is one the coordinator
// could have sent at now (ns, this isolate's clock).
func checkView(l *limiter, v *wire.View, now int64) bool {
	if v.Limit < 0 || v.Limit > wire.MaxLimit {
		return false
	}
	// A coordinator configured with a larger limit grants leases up to
	// it (the isolate then answers with that limit: View.Limit).
	b := max64(l.bound, v.Limit)
	if v.Lease < -1 || v.Lease > b || v.Stand < 0 || v.Stand > b || v.Isolates < 0 || v.Held < 0 || v.Held > b {
		return false
	}
	if v.StandTo != 0 && (l.bucket || v.StandTo <= v.Window || v.StandTo-v.Window > wire.MaxStandWindows) {
		return false
	}
	P := l.cfg.Period
	if l.bucket {
		// The TAT runs ahead of now by at most the burst's refill time
		// times the isolates that overcommitted it; 64 times the longest
		// refill any key may have, past the skew.
		ahead := addSat(viewSkew, mulDiv(mulDiv(b, P, 1), 64, 1))
		return v.TAT >= 0 && v.TAT <= addSat(now, ahead)
	}
	top := mulDiv(b, overcommit, 1)
	return v.Window >= 0 && v.Window <= window(addSat(now, viewSkew), P)+1 &&
		v.Count >= 0 && v.Count <= top && v.Prev >= 0 && v.Prev <= top
}

// maxPause is the longest pause or open circuit a reply may tell, ns: 372
// days, the longest pause a limiter may honour (wire.MaxPeriod * 12).
const maxPause = wire.MaxPeriod * 12

// checkUpView reports whether v is an upstream view a coordinator could
// have sent: durations within 372 days (the longest pause a limiter may
// honour), a known circuit state, a limit within 2^50.
func checkUpView(v *wire.UpView) bool {
	return v.Pause >= 0 && v.Pause <= maxPause && v.Open >= 0 && v.Open <= maxPause &&
		v.Circuit >= wire.CircuitClosed && v.Circuit <= wire.CircuitHalfOpen &&
		v.Limit >= 0 && v.Limit <= wire.MaxLimit && v.Life >= 0
}

// checkReplyRest checks what the first pass of syncIn does not decode:
// the reply's upstream views and reset notices. It returns an error
// (ErrBadInput) when the reply must be refused.
//
//go:noinline
func (c *Core) checkReplyRest() error {
	rr := &c.rr
	ok := rr.ResetGen >= 0
	if ok && rr.HasUpstream() {
		err := rr.Upstream(func(_, _ []byte, v *wire.UpView) {
			ok = ok && checkUpView(v)
		})
		if err != nil {
			return badInput(err)
		}
	}
	if ok && rr.HasPauses() {
		err := rr.LimiterPauses(func(_ []byte, left int64) {
			ok = ok && checkPause(left)
		})
		if err != nil {
			return badInput(err)
		}
	}
	if ok && rr.HasResets() {
		if err := rr.Resets(func(_, _ []byte) {}); err != nil {
			return badInput(err)
		}
	}
	if !ok {
		return badInput(errBadView)
	}
	return nil
}
