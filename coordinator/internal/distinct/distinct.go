// Package distinct counts distinct strings approximately in a fixed 4 KiB:
// a HyperLogLog sketch (Flajolet et al. 2007) of 4096 registers, whose
// estimate is off by 1.6% (one standard error) past a few thousand
// strings and is exact-ish below (linear counting). The coordinator's
// per-token quotas count the keys and isolate ids a token names with it
// (coordinator/quota.go). Kept here rather than taken from a library: it is
// sixty lines, the estimate is kept up to date on every add (a quota reads
// it on every batch), and nothing else needs a sketch.
package distinct

import (
	"hash/maphash"
	"math"
	"math/bits"
)

const (
	precision = 12
	registers = 1 << precision
	// alpha is the bias correction for 4096 registers.
	alpha = 0.7213 / (1 + 1.079/registers)
)

// Counter estimates how many distinct strings were added. The zero value
// is not ready: use New. Not safe for concurrent use.
type Counter struct {
	seed  maphash.Seed
	reg   [registers]uint8
	sum   float64 // sum of 2^-reg over the registers
	zeros int     // registers still 0
}

// New returns an empty Counter whose hashes use seed (one per process:
// a client cannot choose strings that collide).
func New(seed maphash.Seed) *Counter {
	c := &Counter{seed: seed, sum: registers, zeros: registers}
	return c
}

// Add counts the string a+"\x00"+b (two parts, so a caller names a
// limiter and a key without joining them). It reports whether the
// sketch changed (a string seen before never changes it).
func (c *Counter) Add(a, b string) bool {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(a)
	h.WriteByte(0)
	h.WriteString(b)
	x := h.Sum64()
	i := x >> (64 - precision)
	rank := uint8(bits.LeadingZeros64(x<<precision|1<<(precision-1)) + 1)
	old := c.reg[i]
	if rank <= old {
		return false
	}
	c.reg[i] = rank
	c.sum += math.Ldexp(1, -int(rank)) - math.Ldexp(1, -int(old))
	if old == 0 {
		c.zeros--
	}
	return true
}

// Estimate returns the estimated number of distinct strings added.
func (c *Counter) Estimate() float64 {
	e := alpha * registers * registers / c.sum
	if e <= 2.5*registers && c.zeros > 0 {
		// Small range: linear counting over the empty registers.
		return registers * math.Log(float64(registers)/float64(c.zeros))
	}
	return e
}

// Reset empties the counter (its seed stays).
func (c *Counter) Reset() {
	c.reg = [registers]uint8{}
	c.sum, c.zeros = registers, registers
}
