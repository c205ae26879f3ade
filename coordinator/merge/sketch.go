package merge

import (
	"math"
	"math/bits"
)

// isoSketch counts the distinct isolates that reported a key of an
// approximate limiter, for View.Isolates, without remembering them: one
// 256-bit linear-counting bitmap per period for the current and the previous
// period (64 bytes, no pointers). Approximate limiters need nothing else per
// isolate, and a per-isolate list costs a scan per batch entry and, with
// many keys shared by many isolates, most of the coordinator's heap; strict
// limiters keep their per-isolate entries (leases).
//
// Linear counting estimates n distinct isolates from the z zero bits of an
// m-bit map as -m ln(z/m): a relative error of ~1% at 64 isolates, exact
// while few isolates collide (2 isolates share a bit with probability 1/256).
type isoSketch struct {
	epoch int64 // period index (time / period) of cur
	cur   [4]uint64
	prev  [4]uint64
}

// sketchBits is the size of one bitmap.
const sketchBits = 256

// add records the isolate with hash h at period index e.
func (k *isoSketch) add(h uint64, e int64) {
	k.roll(e)
	k.cur[(h>>6)&3] |= 1 << (h & 63)
}

// roll moves the sketch to period index e (never back).
func (k *isoSketch) roll(e int64) {
	switch {
	case e <= k.epoch:
		return
	case e == k.epoch+1:
		k.prev = k.cur
	default:
		k.prev = [4]uint64{}
	}
	k.cur = [4]uint64{}
	k.epoch = e
}

// count estimates the isolates seen in period e and the one before.
func (k *isoSketch) count(e int64) int64 {
	var set int
	switch {
	case e == k.epoch:
		for i := range k.cur {
			set += bits.OnesCount64(k.cur[i] | k.prev[i])
		}
	case e == k.epoch+1:
		for i := range k.cur {
			set += bits.OnesCount64(k.cur[i])
		}
	case e < k.epoch: // a clock that went back: the newest periods
		for i := range k.cur {
			set += bits.OnesCount64(k.cur[i] | k.prev[i])
		}
	}
	if set == 0 {
		return 0
	}
	zero := sketchBits - set
	if zero == 0 {
		zero = 1 // saturated: the estimate's ceiling, ~1420
	}
	return int64(math.Round(-sketchBits * math.Log(float64(zero)/sketchBits)))
}

// isoHash hashes an isolate id (FNV-1a, then a 64-bit finalizer so that the
// low bits, which pick the bit, depend on every byte).
func isoHash(id string) uint64 {
	h := fnv1a(id)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}
