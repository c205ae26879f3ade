package coordinator

import (
	"errors"
	"io"
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

// bodyAllowance is what each body may hold outside the bound: 64 KiB.
const bodyAllowance = 64 << 10

// errBodyBudget is the error of a body read past the bound.
var errBodyBudget = errors.New("coordinator: the request bodies in flight are at their memory bound")

// bodyBudget is the bound on body bytes in flight: the allowances' pool
// (allowMax) and the rest (max).
type bodyBudget struct {
	max, allowMax int64
	used, allowed atomic.Int64
}

// newBodyBudget returns the bound for opts (see above).
func newBodyBudget(opts *Options) *bodyBudget {
	half := opts.MaxMemory / 32
	return &bodyBudget{max: max(half, opts.MaxBodyBytes), allowMax: max(half, bodyAllowance)}
}

// reader returns r counting what it reads against b; release gives it back.
func (b *bodyBudget) reader(r io.Reader) *budgetReader { return &budgetReader{r: r, b: b} }

// budgetReader reads a body within a bodyBudget.
type budgetReader struct {
	r       io.Reader
	b       *bodyBudget
	allowed int64 // bytes read, counted against b's allowances
	taken   int64 // bytes read, counted against b's bound
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
// the allowances' pool while it has room, the rest from the bound. It
// reports false past the bound.
func (br *budgetReader) count(n int64) bool {
	if a := min(n, bodyAllowance-br.allowed); a > 0 {
		if br.b.allowed.Add(a) <= br.b.allowMax {
			br.allowed += a
			n -= a
		} else {
			br.b.allowed.Add(-a) // the pool is full: the bound takes it
		}
	}
	if n > 0 {
		br.taken += n
		if br.b.used.Add(n) > br.b.max {
			return false
		}
	}
	return true
}

// release gives back what br counted against its budget.
func (br *budgetReader) release() {
	br.b.used.Add(-br.taken)
	br.b.allowed.Add(-br.allowed)
	br.taken, br.allowed = 0, 0
}
