package sim

import "math"

// How far the `remaining` the module answers is from the truth. Measured
// on admitted decisions of fixed-window and bucket keys, where the truth
// is plain: a fixed window's limit less the cost admitted in its window
// so far, a bucket's tokens left in a bucket charged with every cost
// admitted (bucketTruth's), the decision's included. The error is the
// answer less that, in % of the limit (a bucket's burst): positive reads
// high (a client told it has room that is gone), negative low. The answer
// is an estimate from a view up to a sync old, so some error is the
// design's; the figures show how much. Sliding windows are not measured
// (their count is weighted).

// remainingBucketPct is the width of the error histogram's buckets, %.
const remainingBucketPct = 0.5

// remainingBuckets covers errors of -100% to +100% of the limit (clamped).
const remainingBuckets = int(200/remainingBucketPct) + 1

// remainingErr accumulates the errors of a run.
type remainingErr struct {
	n    int64
	sum  float64 // Σ error, % of the limit
	hist [remainingBuckets]int64
}

// add notes one answer's error, % of the limit.
func (r *remainingErr) add(errPct float64) {
	r.n++
	r.sum += errPct
	i := int(math.Round((errPct + 100) / remainingBucketPct))
	r.hist[min(max(i, 0), remainingBuckets-1)]++
}

// mean returns the mean error, % of the limit (0 with no answer).
func (r *remainingErr) mean() float64 {
	if r.n == 0 {
		return 0
	}
	return r.sum / float64(r.n)
}

// quantile returns the error that a share q of the answers read at most,
// % of the limit, to the bucket (0 with no answer).
func (r *remainingErr) quantile(q float64) float64 {
	if r.n == 0 {
		return 0
	}
	want := int64(math.Ceil(q * float64(r.n)))
	var seen int64
	for i, c := range r.hist {
		seen += c
		if seen >= want {
			return float64(i)*remainingBucketPct - 100
		}
	}
	return 100
}

// noteRemaining notes the `remaining` of a decision the module admitted
// at now (cost on key gid, before record counts it).
func (e *engine) noteRemaining(gid int32, cost, remaining, now int64) {
	k := &e.keys[gid]
	switch {
	case k.perUnit > 0:
		burst := k.tol / k.perUnit
		if burst <= 0 {
			return
		}
		truth := e.truth[gid].bucket.left(k, now, cost)
		e.remErr.add(100 * float64(remaining-truth) / float64(burst))
	case !k.sliding && k.cap > 0:
		truth := k.cap - (e.truth[gid].admitted + cost)
		e.remErr.add(100 * float64(remaining-truth) / float64(k.cap))
	}
}
