package merge

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"strconv"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// Sequence numbers. The batches of one isolate incarnation are numbered
// densely from 1: the module keeps one batch in flight and resends it with
// the same Seq until a reply is applied (wasm/core/sync.go). Against the
// isolate's high-water mark hw (the last Seq applied, 0 for an isolate the
// coordinator does not know), a batch is
//
//	Seq == hw+1                        the next batch: applied
//	Seq == hw, same content as hw's    a retry: not applied, answered with the current views
//	Seq == hw, other content           SeqConflict: another batch took that number
//	Seq <  hw                          SeqStale: an old or replayed batch, or a restart that kept its id
//	Seq >  hw+1                        SeqGap: numbers were skipped, or the isolate is unknown (forgotten
//	                                   after MergerOptions.IsolateTTL) and Seq != 1
//
// An anomaly applies nothing and is answered 409 with the problem type
// urn:edgelimit:problem:seq_stale, seq_gap or seq_conflict. The isolate then
// starts a new incarnation (a new isolate id, Seq back to 1) and resends the
// same deltas as its batch 1 (core.Core.Reincarnate), so nothing is lost and
// nothing is counted twice. A batch can thus never move another
// incarnation's high-water mark out of its reach: a jumped Seq is refused,
// not recorded.
//
// Identity. Before its sequence number, a batch for a known isolate
// (hw > 0) must carry the secret its incarnation's first batch carried
// (wire.Batch.Secret; the coordinator keeps its SHA-256, cut to 16 bytes,
// in the high-water mark, so it is persisted and shared like the mark).
// Without it the batch is SeqIdentity: refused, 409
// urn:edgelimit:problem:seq_identity, with no sequence number told (the
// error carries none). A client that knows an isolate id but not its
// secret thus learns nothing of its sequence and cannot make the real
// isolate reincarnate (it would have to send the next number before the
// isolate does, with its secret). A restart that kept its id starts with
// a new secret, is refused the same way and starts a new incarnation. An
// isolate whose first batch carried no secret (a host older than secrets)
// is bound to none: its batches need none, and its id is unprotected.

// ErrSequence marks a batch refused for its sequence number (a *SeqError).
var ErrSequence = errors.New("merge: batch out of sequence")

// SeqAnomaly names why a sequence number was refused.
type SeqAnomaly string

// The anomalies (see the package's sequence rules above).
const (
	SeqStale    SeqAnomaly = "stale"
	SeqGap      SeqAnomaly = "gap"
	SeqConflict SeqAnomaly = "conflict"
	SeqIdentity SeqAnomaly = "identity"
)

// SeqError is a batch refused for its sequence number; nothing of it was
// applied. It matches ErrSequence with errors.Is.
type SeqError struct {
	Anomaly   SeqAnomaly
	Seq       int64 // the batch's sequence number (0 for SeqIdentity: not told)
	HighWater int64 // the isolate's high-water mark (0: unknown isolate, or SeqIdentity: not told)
}

// Error says why the batch was refused and what the client does next.
func (e *SeqError) Error() string {
	if e.Anomaly == SeqIdentity {
		return "merge: the batch does not carry the secret of the incarnation that holds its isolate id" +
			" (another client, or a restart that kept its id); start a new incarnation (a new isolate id and secret, its sequence from the start) and resend"
	}
	s := "merge: batch seq " + strconv.FormatInt(e.Seq, 10) + " is " + string(e.Anomaly) +
		": the isolate's last applied seq is " + strconv.FormatInt(e.HighWater, 10)
	switch e.Anomaly {
	case SeqStale:
		s += " (an old batch, or a restart that kept its isolate id)"
	case SeqGap:
		s += " (numbers skipped or isolate unknown); the next batch must be " + strconv.FormatInt(e.HighWater+1, 10)
	case SeqConflict:
		s += " and that number was applied to a different batch"
	}
	return s + "; start a new incarnation (new isolate id, seq 1) and resend"
}

// Is makes errors.Is(err, ErrSequence) hold.
func (e *SeqError) Is(target error) bool { return target == ErrSequence }

// retried reports whether b is a plain resend (no asks) of a number the
// isolate's batches applied already: checkSeq answers it as a retry or
// refuses it, whatever its times, and its times are not checked (a
// refusal for them tells the isolate nothing of the batch was applied;
// wasm/core retime.go). An amendment's asks are granted, so its times are
// always checked.
func (h *hwmState) retried(b *wire.Batch) bool {
	return h.seq > 0 && b.Seq <= h.seq && len(b.Asks) == 0
}

// checkSeq classifies b against the isolate's high-water mark h: it reports
// whether b is a retry of the last applied batch, or a *SeqError.
func checkSeq(h *hwmState, b *wire.Batch, sum uint64) (retry bool, err error) {
	if h.seq > 0 && !h.holds(b.Secret) {
		return false, &SeqError{Anomaly: SeqIdentity}
	}
	switch {
	case b.Seq == h.seq+1:
		return false, nil
	case b.Seq == h.seq:
		if h.sum != 0 && h.sum != sum {
			return false, &SeqError{Anomaly: SeqConflict, Seq: b.Seq, HighWater: h.seq}
		}
		return true, nil
	case b.Seq < h.seq:
		return false, &SeqError{Anomaly: SeqStale, Seq: b.Seq, HighWater: h.seq}
	}
	return false, &SeqError{Anomaly: SeqGap, Seq: b.Seq, HighWater: h.seq}
}

// batchSum is a 64-bit FNV-1a digest of b's content (time and entries),
// never 0: a retry resends the same bytes, so the same digest. It tells a
// retry from another batch that reuses the number (a restarted isolate
// that kept its id, or a forged batch).
func batchSum(b *wire.Batch) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	num := func(v int64) {
		for i := 0; i < 8; i++ {
			h = (h ^ uint64(byte(v>>(8*i)))) * prime
		}
	}
	str := func(s string) {
		num(int64(len(s)))
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
	}
	num(b.At)
	num(int64(len(b.Entries)))
	for i := range b.Entries {
		e := &b.Entries[i]
		str(e.Limiter)
		str(e.Key)
		num(e.Window)
		num(e.Delta)
		num(e.Demand)
	}
	return h | 1
}

// secretHash is what the coordinator keeps of an isolate secret: the first
// 16 bytes of its SHA-256; zero for no secret.
func secretHash(secret string) (h [16]byte) {
	if secret != "" {
		s := sha256.Sum256([]byte(secret))
		copy(h[:], s[:16])
	}
	return h
}

// holds reports whether secret is the one h's incarnation is bound to
// (compared in constant time).
func (h *hwmState) holds(secret string) bool {
	want := secretHash(secret)
	return subtle.ConstantTimeCompare(h.secret[:], want[:]) == 1
}

// bind records the secret of b, the batch being applied, as h's (the
// same one for every batch after the first: checkSeq refused others).
func (h *hwmState) bind(b *wire.Batch) { h.secret = secretHash(b.Secret) }
