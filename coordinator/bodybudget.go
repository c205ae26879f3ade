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
// bytes of the bodies being read or handled beyond the first
// bodyAllowance of each are bounded by Options.MaxMemory/16 (48 MiB at the
// default; at least one body of MaxBodyBytes): a read past it stops and the
// sync is answered 503 with the problem type urn:edgelimit:problem:busy
// and Retry-After (nothing applied; the isolate resends the batch, which
// the syncloop does after a 503). Batches under the allowance, the common
// case, never wait for the bound.

// bodyAllowance is what each body may hold outside the bound: 64 KiB.
const bodyAllowance = 64 << 10

// errBodyBudget is the error of a body read past the bound.
var errBodyBudget = errors.New("coordinator: the request bodies in flight are at their memory bound")

// bodyBudget is the bound on body bytes in flight.
type bodyBudget struct {
	max  int64
	used atomic.Int64
}

// newBodyBudget returns the bound for opts (see above).
func newBodyBudget(opts *Options) *bodyBudget {
	return &bodyBudget{max: max(opts.MaxMemory/16, opts.MaxBodyBytes)}
}

// reader returns r counting what it reads against b; release gives it back.
func (b *bodyBudget) reader(r io.Reader) *budgetReader { return &budgetReader{r: r, b: b} }

// budgetReader reads a body within a bodyBudget.
type budgetReader struct {
	r     io.Reader
	b     *bodyBudget
	read  int64 // bytes read
	taken int64 // of them, counted against b
}

// Read reads from the body; past the bound it returns errBodyBudget.
func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	br.read += int64(n)
	if over := br.read - bodyAllowance - br.taken; over > 0 {
		br.taken += over
		if br.b.used.Add(over) > br.b.max {
			return n, errBodyBudget
		}
	}
	return n, err
}

// release gives back what br counted against its budget.
func (br *budgetReader) release() {
	br.b.used.Add(-br.taken)
	br.taken = 0
}
