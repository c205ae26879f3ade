package coordinator

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// Request bodies in memory. POST /v1/sync reads a whole body (up to
// Options.MaxBodyBytes, 4 MiB by default) before decoding it, and each
// connection may be sending one: without a bound, clients holding many
// connections open with large bodies (the last byte held back until the
// read timeout) hold that much memory each, past the memory the
// coordinator is sized for (50 such bodies held 189 MiB of heap). So the
// bytes of the bodies being read or handled are bounded by
// Options.MaxMemory/16 (48 MiB at the default; at least one body of
// MaxBodyBytes beyond the allowances): a read past it stops and the sync
// is answered 503 with the problem type urn:edgelimit:problem:busy and
// Retry-After (nothing applied; the isolate resends the batch, which the
// syncloop does after a 503). The first bodyAllowance of each body comes
// from a pool of its own, half of that bound: batches under the allowance,
// the common case, never wait for the bodies of a few large batches. The
// pool is bounded too: when a client holds thousands of connections each
// sending its first 64 KiB, those bodies spill into the bound and are
// answered busy there (before, the allowances were outside any bound:
// 8,000 such connections held 715 MB on a coordinator sized for 128 MiB).
//
// With tokens, each token has a share of each pool: the bodies of one
// token's requests hold at most half of the allowances' pool and half of
// the bound (at least one body of MaxBodyBytes), so a client holding many
// uploads open with one token gets its own syncs answered busy, not every
// other token's (before, 130 stalled uploads of one edge token made every
// other client's sync answer 503 on a coordinator sized for 256 MiB).
// Without tokens every client is trusted alike and shares the whole pools.
// A body must also keep coming (bodyrate.go), so a stalled upload gives
// its bytes back within seconds rather than at the read timeout.

// bodyAllowance is what each body may hold outside the bound: 64 KiB.
const bodyAllowance = 64 << 10

// errBodyBudget is the error of a body read past the bound.
var errBodyBudget = errors.New("coordinator: the request bodies in flight are at their memory bound")

// bodyBudget is the bound on body bytes in flight: the allowances' pool
// (allowMax) and the rest (max), each shared out by token (shareMax,
// shareAllowMax).
type bodyBudget struct {
	max, allowMax           int64
	shareMax, shareAllowMax int64
	used, allowed           atomic.Int64

	mu     sync.Mutex
	shares map[string]*bodyShare // by token scope, while a body of it is read
}

// bodyShare is what the bodies of one token hold, counted like the pools.
type bodyShare struct {
	used, allowed atomic.Int64
	readers       int // bodies of the token in flight, under bodyBudget.mu
}

// newBodyBudget returns the bound for opts (see above).
func newBodyBudget(opts *Options) *bodyBudget {
	half := opts.MaxMemory / 32
	b := &bodyBudget{max: max(half, opts.MaxBodyBytes), allowMax: max(half, bodyAllowance), shares: map[string]*bodyShare{}}
	b.shareMax = max(b.max/2, min(b.max, opts.MaxBodyBytes))
	b.shareAllowMax = max(b.allowMax/2, bodyAllowance)
	return b
}

// reader returns r counting what it reads against b and against the share
// of the token whose scope is scope ("" without tokens: no share, the
// whole pools); release gives it back.
func (b *bodyBudget) reader(r io.Reader, scope string) *budgetReader {
	br := &budgetReader{r: r, b: b, scope: scope}
	if scope != "" {
		b.mu.Lock()
		s := b.shares[scope]
		if s == nil {
			s = &bodyShare{}
			b.shares[scope] = s
		}
		s.readers++
		b.mu.Unlock()
		br.share = s
	}
	return br
}

// budgetReader reads a body within a bodyBudget.
type budgetReader struct {
	r       io.Reader
	b       *bodyBudget
	scope   string
	share   *bodyShare // nil without tokens
	allowed int64      // bytes read, counted against b's allowances
	taken   int64      // bytes read, counted against b's bound
}

// Read reads from the body; past the bound it returns errBodyBudget.
func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	if n > 0 && !br.count(int64(n)) {
		return n, errBodyBudget
	}
	return n, err
}

// count takes n more bytes read: the first bodyAllowance of the body from
// the allowances' pool while it and the token's share of it have room, the
// rest from the bound and the token's share of it. It reports false past
// either.
func (br *budgetReader) count(n int64) bool {
	b, s := br.b, br.share
	if a := min(n, bodyAllowance-br.allowed); a > 0 {
		if take(&b.allowed, a, b.allowMax) {
			if s == nil || take(&s.allowed, a, b.shareAllowMax) {
				br.allowed += a
				n -= a
			} else {
				b.allowed.Add(-a) // the token's share is full: the bound takes it
			}
		}
	}
	if n > 0 {
		br.taken += n
		over := b.used.Add(n) > b.max
		if s != nil && s.used.Add(n) > b.shareMax {
			over = true
		}
		if over {
			return false
		}
	}
	return true
}

// take adds n to c if the sum stays within max, and reports whether it did.
func take(c *atomic.Int64, n, max int64) bool {
	if c.Add(n) <= max {
		return true
	}
	c.Add(-n)
	return false
}

// release gives back what br counted against its budget.
func (br *budgetReader) release() {
	b, s := br.b, br.share
	b.used.Add(-br.taken)
	b.allowed.Add(-br.allowed)
	if s != nil {
		s.used.Add(-br.taken)
		s.allowed.Add(-br.allowed)
		b.mu.Lock()
		if s.readers--; s.readers == 0 {
			delete(b.shares, br.scope)
		}
		b.mu.Unlock()
		br.share = nil
	}
	br.taken, br.allowed = 0, 0
}
