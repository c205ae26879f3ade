package merge

import "github.com/edgelimit/edgelimit/wasm/wire"

// Confirming the leases a duplicate tells (shared mode). A duplicate part
// (its isolate's mark in the bucket is at the batch's Seq) is answered
// with the views of the state it read, and a strict key's view tells the
// isolate its lease: what it may admit from the batch's cut on. That state
// may hold a write not confirmed by replicas (WAIT not met, so its attempt
// failed with ErrUnavailable): an amendment's grant above all, which
// moves no mark, so that neither SubWrite.Confirm nor the isolate's next
// batch confirms it before another attempt of the same batch reads it: the
// amendment resent (its ask now covered), a later amendment asking for
// other keys only, or the batch itself, sent before the amendment and
// delivered after it. Told, and then lost with its master, such a lease
// is budget the promoted replica grants again to another isolate: the
// window goes over its limit. So a duplicate part whose reply tells a
// lease rewrites the records of those keys (version-checked, as any
// write; a part with asks is written anyway, shared_amend.go, and this
// makes sure it writes a record even when its asks changed none); WAIT
// after it covers every earlier write on the master, and the reply is sent
// only once it is met (TestRedisDuplicateConfirmsLease,
// TestRedisAmendmentFailover). A duplicate with no asks telling no lease
// (approximate keys, a lease of 0) is answered from what was read, with no
// write. Without WAIT the write confirms nothing more than the read did;
// it costs one script call per such duplicate (retries of strict batches).

// confirmLeases marks for writing the keys whose views in rp, the reply of
// a duplicate part applied by m, tell a lease (Lease or Stand > 0), and
// reports whether one did.
func (m *Merger) confirmLeases(rp *wire.Reply) bool {
	told := false
	for i := range rp.Entries {
		v := &rp.Entries[i]
		if v.Lease <= 0 && v.Stand <= 0 {
			continue
		}
		m.buf = appendKeyStorageKey(m.buf[:0], v.Limiter, v.Key)
		if st := m.keys[string(m.buf)]; st != nil {
			m.markKey(st)
			told = true
		}
	}
	return told
}
