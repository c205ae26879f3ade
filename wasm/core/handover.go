package core

import "github.com/edgelimit/edgelimit/wasm/wire"

// A reincarnation hands its leases over. The coordinator refused the
// outstanding batch's sequence number (its mark of this isolate was lost
// or rolled back, say by a Redis failover), so the host gave the isolate
// a new id and secret (Reincarnate). The leases it holds were granted to
// the old id, and it goes on spending them: reported under the new id,
// that cost would be counted on top of the old id's reservation, which
// the coordinator keeps, as spent, until its window ends (units gone for
// the rest of a day on a daily key). So the new incarnation's batches
// name the old one (wire.Batch.Prev, with its secret, which proves the
// batch comes from the isolate that held the id) until a batch cut after
// the reincarnation, naming every key that holds a lease, is answered;
// the coordinator moves the old id's lease on each key of those batches
// to the new id (coordinator/merge, handover.go).

// predecessor is the incarnation whose leases this one takes over.
type predecessor struct {
	id, secret string
	// seq is the batch (Core.seq) cut after the reincarnation that named
	// every key holding a lease: its reply ends the handover. 0: not cut
	// yet.
	seq int64
}

// startHandover notes, at a reincarnation, the incarnation being left:
// its id and secret, and whether any of its batches was answered (the
// coordinator knows its secret only then). Its leases are handed over
// when it had a secret, an answered batch and a lease; otherwise an
// earlier handover not finished yet goes on (nothing of it moved under
// the incarnation being left). Every leased key is put on the dirty list,
// so the next batch cut names it; a graceful stop's last batch, the one
// refused, is resent as batch 1 and still the last (the leases were
// dropped when it was cut, and it names every leased key), so its reply
// ends the handover.
func (c *Core) startHandover(oldID, oldSecret string, answered bool) {
	if c.leased() == 0 && !c.outEnd {
		c.pred = predecessor{}
		return
	}
	if oldSecret != "" && answered {
		c.pred = predecessor{id: oldID, secret: oldSecret}
	}
	if c.pred.id == c.cfg.IsolateID {
		c.pred = predecessor{}
	}
	switch {
	case c.pred.id != "" && c.outEnd:
		c.pred.seq = 1 // the End batch resent as batch 1 names every leased key
	case c.pred.id != "":
		c.pred.seq = 0
		c.dirtyLeased()
	}
}

// handing reports whether the next batch cut must name every leased key
// for the handover.
func (c *Core) handing() bool { return c.pred.id != "" && c.pred.seq == 0 }

// handoverCut notes that the batch just cut (c.seq) carries the
// predecessor, and, when the dirty list is empty after it, every leased
// key: its reply ends the handover.
func (c *Core) handoverCut() {
	if c.handing() && len(c.dirty) == 0 {
		c.pred.seq = c.seq
	}
}

// handoverAnswered ends the handover once the reply to batch seq, the one
// that named every leased key, is applied.
func (c *Core) handoverAnswered(seq int64) {
	if c.pred.seq != 0 && seq >= c.pred.seq {
		c.pred = predecessor{}
	}
}

// handoverRecalled undoes handoverCut for a batch taken back (Recall):
// it is cut again.
func (c *Core) handoverRecalled() {
	if c.pred.seq > c.seq {
		c.pred.seq = 0
	}
}

// batchID is who cuts the next batch: the isolate, and while a handover
// goes on its predecessor.
func (c *Core) batchID() wire.BatchID {
	return wire.BatchID{Isolate: c.cfg.IsolateID, Secret: c.cfg.IsolateSecret, Prev: c.pred.id, PrevSecret: c.pred.secret}
}

// leased returns how many keys hold a lease or a standing lease.
func (c *Core) leased() int {
	n := 0
	for i := 0; i < c.tab.n; i++ {
		if c.holdsLease(c.tab.at(int32(i))) {
			n++
		}
	}
	return n
}
