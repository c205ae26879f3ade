package sim

// bucketTruth measures a bucket key (token bucket, GCRA) in one window
// against the bucket it stands for. A window's count says little there: a
// window that follows a burst has only the refill to give, and one that
// follows a quiet spell has the burst on top. So exact is what one exact
// bucket, deciding every offered request as it came (as central would with
// no latency), admitted in the window, and over is the most the cost the
// strategy admitted, charged to a bucket of its own whatever it holds,
// passed the burst in the window (units). Utilisation and unserved demand
// of a bucket key are measured against exact.
type bucketTruth struct {
	exactTAT, tat int64 // the theoretical arrival times (ns): the exact bucket's, the admitted cost's
	exact, over   int64 // in the current window, units
}

// offer decides cost offered at now (ns) by the exact bucket.
func (b *bucketTruth) offer(k *keyInfo, now, cost int64) {
	next := max(b.exactTAT, now) + cost*k.perUnit
	if next-now <= k.tol {
		b.exactTAT = next
		b.exact += cost
	}
}

// admit charges cost admitted at now (ns) to the admitted cost's bucket,
// and notes how far past its burst it is.
func (b *bucketTruth) admit(k *keyInfo, now, cost int64) {
	b.tat = b.charged(k, now, cost)
	if debt := b.tat - now - k.tol; debt > 0 {
		b.over = max(b.over, (debt+k.perUnit-1)/k.perUnit)
	}
}

// charged returns the admitted cost's bucket's TAT once cost admitted at
// now (ns) is charged to it.
func (b *bucketTruth) charged(k *keyInfo, now, cost int64) int64 {
	return max(b.tat, now) + cost*k.perUnit
}

// left returns the units left in the admitted cost's bucket at now once
// cost is charged to it (0 past its burst).
func (b *bucketTruth) left(k *keyInfo, now, cost int64) int64 {
	return max(now+k.tol-b.charged(k, now, cost), 0) / k.perUnit
}

// roll starts a new window: the buckets carry over, the counts do not.
func (b *bucketTruth) roll() { b.exact, b.over = 0, 0 }
