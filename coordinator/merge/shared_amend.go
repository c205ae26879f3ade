package merge

import (
	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Amendments in shared mode (wire/amend.go, amend.go). Each ask goes to the
// part of its key's bucket (a bucket the batch's entries do not touch gets
// a part of asks only) and is served by that part's Apply, on the state
// read for it, like the entries. A part with asks is written even when it
// is already applied (its isolate's mark in the bucket is at the batch's
// Seq), with the usual version check (a conflict: merged again on what
// another coordinator wrote) and without moving any mark: a lease is told
// to the isolate only once the write of its grant succeeded, and it is
// granted only against the budget free in the state it was computed on,
// so no window goes over its limit across coordinators. The write happens
// even when the asks raised no lease (resent, or covered already), as for
// any duplicate whose reply tells a lease (sharedconfirm.go): with replica
// acknowledgement (WAIT) it confirms the leases the reply tells, which an
// earlier attempt may have written without confirmation (that attempt
// failed with ErrUnavailable). Asks of limiters that take none
// (approximate, buckets, upstream-following: see asks) are dropped, as in
// Merger.Apply.

// routeAsks adds each ask of b that its limiter takes to the part subFor
// returns for its key's bucket and storage key, and returns buf (scratch
// space for the storage key). An isolate's last batch (End) gives its
// leases back: its asks are dropped, as Merger.Apply ignores them.
func (s *SharedMerger) routeAsks(m *Merger, b *wire.Batch, buf []byte, subFor func(bucket int, key []byte) *sharedSub) []byte {
	if b.End {
		return buf
	}
	for i := range b.Asks {
		a := b.Asks[i]
		if !asks(m.lims[a.Limiter]) {
			continue
		}
		buf = appendKeyStorageKey(buf[:0], a.Limiter, a.Key)
		sb := subFor(s.store.Bucket(buf), buf)
		sb.asks = append(sb.asks, a)
	}
	return buf
}

// liveAsks returns the asks of a part whose isolate's mark in the bucket is
// mark: none once a later batch of the isolate was applied there (its
// asks are older than that batch's cut, which its reply answered).
func liveAsks(asks []wire.Ask, mark, seq int64) []wire.Ask {
	if mark > seq {
		return nil
	}
	return asks
}

// askOrder returns the rank of each key of b's reply: its entries' keys in
// order of first appearance, then its asks' keys, as Merger.Apply orders
// its views.
func (s *SharedMerger) askOrder(b *wire.Batch) map[[2]string]int {
	order := make(map[[2]string]int, len(b.Entries)+len(b.Asks))
	add := func(limiter, key string) {
		k := [2]string{limiter, key}
		if _, ok := order[k]; !ok {
			order[k] = len(order)
		}
	}
	for i := range b.Entries {
		add(b.Entries[i].Limiter, b.Entries[i].Key)
	}
	for i := range b.Asks {
		add(b.Asks[i].Limiter, b.Asks[i].Key)
	}
	return order
}
