package merge

import "errors"

// ErrUnavailable wraps a Store failure (a failed commit or read: full disk,
// I/O error): the batch was not applied and may be retried with the same
// Seq. The coordinator maps it to HTTP 503.
var ErrUnavailable = errors.New("merge: store unavailable")

// Store is the durable key-value state under a Merger. Keeping it this small
// lets the merge logic move to another backend (a distributed store for users
// who outgrow one machine) without change. Implementations must be safe for
// use by one goroutine at a time; the Coordinator serializes all calls.
type Store interface {
	// Get returns a copy of the value stored under key, or found == false.
	Get(key []byte) (value []byte, found bool, err error)
	// Commit applies ops atomically and durably (synced to stable storage)
	// before returning. On error none of ops may be visible to later Gets.
	Commit(ops []Op) error
	// Scan calls fn for each key >= start with the given prefix, in order,
	// until fn returns false or an error. key and value are only valid
	// during the call.
	Scan(prefix, start []byte, fn func(key, value []byte) bool) error
	// Close releases the store.
	Close() error
}

// Op is one write of a Commit: a Set of Value under Key, a Delete of Key,
// or, when End is set, a Delete of every key in [Key, End).
type Op struct {
	Key    []byte
	Value  []byte
	End    []byte // range deletes only
	Delete bool
}
