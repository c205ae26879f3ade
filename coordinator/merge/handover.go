package merge

import (
	"errors"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Handover: a new incarnation takes its predecessor's leases.
//
// An isolate whose batch was refused for its sequence number (its mark
// was lost or rolled back: a Redis failover that lost the last write, a
// store restored from a copy) starts a new incarnation under a new id
// (core.Core.Reincarnate) and goes on spending the leases it held. Until
// a batch cut after that, naming every key that holds a lease, is
// answered, its batches name the incarnation left and its secret
// (wire.Batch.Prev, PrevSecret). When the secret is the one the old id's
// batches were bound to (its high-water mark keeps its hash), the batch
// comes from the isolate that held those leases, and on each of the
// batch's keys the old id's entry (lease, standing lease, demand, lives)
// becomes the new id's: the cost the isolate reports from then on spends
// it, as it would have under the old id. Without the move the old lease
// stayed reserved, as spent, for the rest of its window while the same
// units were reported again under the new id (5 reincarnations on a
// 100/hour strict key stranded 8 units for the hour).
//
// Nothing moves without the secret (a client that knows an id cannot take
// its leases, nor free them to be granted twice), for an old id whose
// batches carried no secret, or onto a key where the new id has an entry
// already (its own lease: the old one stays reserved, the safe side).

// predecessor returns the scoped id of the incarnation b takes over, when
// b names one whose secret it proves; "" otherwise. An unknown id is not
// cached (a flood of made-up names would fill the mark cache). A failed
// read of its mark is an error: the batch is refused and resent (taken as
// "no predecessor", the module would end its handover, stranding the
// leases for their windows).
func (m *Merger) predecessor(b *wire.Batch, scope string) (string, error) {
	if b.Prev == "" {
		return "", nil
	}
	id := scope + b.Prev
	h, ok := m.hwms[id]
	if !ok {
		var found bool
		var err error
		switch h, found, err = m.readHWM(id); {
		case errors.Is(err, errCorrupt) || err == nil && !found:
			m.stats.HandoversRefused++ // nothing to check the secret against
			return "", nil
		case err != nil:
			return "", err
		}
		m.hwms[id] = h
	}
	if h.seq == 0 || h.secret == ([16]byte{}) || !h.holds(b.PrevSecret) {
		m.stats.HandoversRefused++
		return "", nil
	}
	return h.id, nil
}

// handOver moves the predecessor's entry in st (see above) to the
// isolate id, which has none there yet.
func (m *Merger) handOver(st *keyState, id string) {
	if m.pred == "" || st.findIso(id) >= 0 {
		return
	}
	j := st.findIso(m.pred)
	if j < 0 {
		return
	}
	st.isos[j].id = id
	m.markKey(st)
	m.stats.Handovers++
}
