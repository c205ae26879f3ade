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
// limiter's held request waits for the next batch.
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
		s.amended = s.unsent
		w := window(now, l.cfg.Period)
		need := addSat(s.asked, s.unsent)
		if e.win == w {
			need = addSat(need, e.pCur)
		}
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
