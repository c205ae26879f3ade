package merge

import "github.com/edgelimit/edgelimit/wasm/wire"

// The storage layout that a store routing keys by their kind needs (the
// Redis Cluster store puts each key in a hash slot): the records of the
// Merger are keyed by a one-byte prefix.
const (
	// PrefixKey starts the storage key of a (limiter, key) record.
	PrefixKey = prefixKey
	// PrefixHWM starts the storage key of an isolate's high-water mark.
	PrefixHWM = prefixHWM
)

// ErrCorrupt is returned for a stored record that does not decode.
var ErrCorrupt = errCorrupt

// HWMStorageKey returns the storage key of isolate's high-water mark
// (isolate is the scoped id: scope + id).
func HWMStorageKey(isolate string) string { return hwmStorageKey(isolate) }

// KeyStorageKey returns the storage key of the record of (limiter, key).
func KeyStorageKey(limiter, key string) string { return keyStorageKey(limiter, key) }

// SharedCounts decodes v, the record of the key stored under skey of a
// windowed limiter lim as a SharedStore's ReadShared returns it (a key
// record or a counter record), and returns the counts of its newest window
// and of the one before (0, 0 when absent). For tools and tests that read
// a shared store directly.
func SharedCounts(lim *wire.LimiterConfig, skey string, v Versioned) (count, prev int64, err error) {
	if v.Counter != nil {
		return v.Counter.Count, v.Counter.Prev, nil
	}
	if v.Version == 0 {
		return 0, 0, nil
	}
	st := newKeyState(lim, skey)
	if err := decodeShared(st, v.Value, DefaultMaxIsolatesPerKey); err != nil {
		return 0, 0, err
	}
	return st.count, st.prev, nil
}
