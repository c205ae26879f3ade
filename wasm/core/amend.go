package core

import "github.com/edgelimit/edgelimit/wasm/wire"

// Amend returns, appended to dst, the outstanding batch amended with the
// asks of the keys whose requests it held (SyncRetry) since the batch was
// cut (wire/amend.go): the same Seq, time and entries, with
// wire.Batch.Asks. The host sends it at once, while the batch is in
// flight (up to two per batch: edge/syncloop.NextAsk), and applies the
// replies of all, an amendment's also while the next batch is in flight
// (see SyncIn). It returns dst unchanged when no batch is in flight, the batch
// is a graceful stop's last, or no request was held since the last
// amendment: the host then waits for a reply. Until a reply is applied,
// SyncOut returns the last amendment.
//
// Asks are made for strict windowed keys that do not follow an upstream
// (the keys whose requests wait for a lease); a bucket's or an upstream
// limiter's held request waits for the next batch. A key whose asks the
// batch's own reply can be expected to grant (expectCovered) is not asked
// for: its requests wait for that reply, and ask again if it does not.
func (c *Core) Amend(now int64, dst []byte) ([]byte, error) {
	c.see(now)
	if len(c.outBuf) == 0 || c.outEnd {
		return dst, nil
	}
	ak := c.akBuf[:0]
	n := 0
	for _, d := range c.dirty {
		e := c.tab.at(d.idx)
		if e.gen != d.gen || !e.dirty() {
			continue
		}
		l := &c.lims[e.lim]
		if !l.strict || l.bucket || l.cfg.Upstream != nil || n == wire.MaxBatchEntries {
			continue
		}
		s := c.tab.lease(e)
		if s.unsentSeq != c.seq || s.unsent <= s.amended {
			continue // nothing held since the cut, or nothing since the last amendment
		}
		// What it needs from the cut on: what it admitted since in the
		// window of now, and what it holds: the requests the batch asked
		// for (s.asked) and those held since (s.unsent; no reply came
		// since the cut: none of them was admitted). s.asked stays the
		// batch's own: the batch's reply, made before the coordinator
		// saw the amendment, grants none of the amendment's asks, and
		// that must not start a dry spell (apply).
		w := window(now, l.cfg.Period)
		need := addSat(s.asked, s.unsent)
		if e.win == w {
			need = addSat(need, e.pCur)
		}
		if c.expectCovered(l, s, w, need) {
			continue
		}
		s.amended = s.unsent
		ak = wire.AppendKeyCost(ak, l.cfg.Name, c.tab.keyBytes(e), w, need)
		n++
	}
	c.akBuf = ak
	if n == 0 {
		return dst, nil
	}
	c.amendSeq = c.seq
	c.akArr = append(wire.AppendArrayHeader(c.akArr[:0], n), ak...)
	c.rebuildOut(c.akArr)
	return append(dst, c.outBuf...), nil
}

// expectCovered reports whether the reply of the batch in flight can be
// expected to grant a key of limiter l what its held requests need (need:
// the cost from the batch's cut on, in window w) without an amendment
// asking for it. The coordinator sizes the lease of an isolate that
// reports a key at least four times a window (c.gap, as
// coordinator/merge's frequent) at twice its demand per batch, from the
// batch's cut on, as an ask is: when need is within the last such grant
// in w, the batch's reply brings about as much again (more if the demand
// grew), and an amendment would ask for what that reply grants anyway.
// (The batch reports the key then: a request is held only when the grant
// is spent, so with need within it the key admitted cost before the cut.)
// Only where the last reply's lease lives a window or longer (longLife:
// the coordinator's lease life is no shorter than the window): in a
// longer window a lease that lasted until the batch does not grow, and
// what a busy isolate holds ahead is held to what it uses within that
// life (coordinator/merge need and grantWindow), so the reply may grant
// nothing of need.
//
// Measured on the simulator's corpus (64 isolates, 100 ms sync, 3
// seeds): busy isolates amended nearly every batch twice, bursty-5000
// 3.7% of its decisions (of 10.4% sync requests per decision). A sparse
// isolate's lease is what it asked for (plus a unit ahead): its held
// requests always ask. Near the limit the reply may grant less (the
// coordinator shrinks leases as the window fills): the requests it leaves
// are decided SyncRetry again and ask at once (edge/syncloop.NextAsk), a
// round trip later than an amendment would have.
func (c *Core) expectCovered(l *limiter, s *leaseRec, w, need int64) bool {
	return c.gap > 0 && c.gap*4 <= l.cfg.Period && s.longLife && s.hasLease && s.leaseWin == w && need <= s.leaseGrant
}
