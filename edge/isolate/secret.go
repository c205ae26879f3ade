package isolate

import (
	"crypto/rand"
	"encoding/hex"
)

// NewSecret returns a new isolate secret (wire.Config.IsolateSecret): 32
// hex digits of 16 bytes from crypto/rand. Each incarnation of an isolate
// (its first configuration, a restart after a trap, Reincarnate) takes a
// new one, so that only the incarnation that started an isolate id's
// sequence can continue it at the coordinator (see wire.Batch.Secret). It
// is drawn from crypto/rand, not from the isolate's seeded WASI random
// source, which is reproducible by design.
func NewSecret() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand.Read panics rather than return an error)
	return hex.EncodeToString(b[:])
}
