package sim

// The mark a windowed key's utilisation and unserved demand are measured
// against. min(offered, capacity) is only reachable when every cost fits
// the room left: with requests of cost 30 on a limit of 100, three fit a
// window (90) and an exact limiter read 10% unserved and 90% utilisation;
// with cost 10 on a limit of 5 none fits, and every strategy read 100%
// unserved. So a window's mark is what one exact counter, deciding every
// request offered in it in the order the strategy decided them (record),
// would have admitted: a request fits when the cost it counted so far plus
// its own stays within the capacity (truth.exact). For requests of cost 1
// that is min(offered, capacity). A strategy that packed better than that
// greedy counter (it admitted more, within the capacity) is measured
// against what it admitted, so the utilisation never reads over 100%
// without an overrun. Bucket keys have their own exact bucket
// (bucketTruth).

// offerExact decides cost, offered in tr's window of the windowed key k,
// by the window's exact counter (truth.exact).
func (tr *truth) offerExact(k *keyInfo, cost int64) {
	if k.perUnit == 0 && tr.exact+cost <= k.cap {
		tr.exact += cost
	}
}

// bound returns what tr's window of key k could admit: the mark its
// utilisation and unserved demand are measured against.
func (tr *truth) bound(k *keyInfo) int64 {
	if k.perUnit > 0 {
		return tr.bucket.exact
	}
	if tr.admitted > tr.exact && tr.admitted <= k.cap {
		return tr.admitted // a better packing than the greedy counter's
	}
	return tr.exact
}
