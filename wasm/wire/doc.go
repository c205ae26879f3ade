// Package wire holds the msgpack messages that cross the edgelimit system:
// the limiter configuration, the sync batch an isolate sends, the
// coordinator's reply, the decision request and result of the Extism-style
// export, and the isolate's stats. The guest module, the edge host, the
// coordinator and the simulator all use this one package.
//
// Every message is a msgpack map with short string keys and a version field
// "v" (Version). Repeated entries are msgpack arrays of fixed position, to
// keep batches small. Unknown map keys are skipped, so a newer peer may add
// fields. Times are int64 nanoseconds (Unix epoch for wall clocks, any epoch
// for virtual time); durations are int64 nanoseconds.
//
// The package compiles for the host and for the TinyGo guest: it uses no
// reflection, no fmt and no goroutines.
package wire

// Version is the wire version this package writes and accepts.
const Version = 1

// Bounds shared by every component.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 256
	// MaxNameLen is the longest limiter name, in bytes.
	MaxNameLen = 64
	// MaxIsolateIDLen is the longest isolate id, in bytes.
	MaxIsolateIDLen = 128
	// MinSecretLen and MaxSecretLen bound an isolate secret
	// (Config.IsolateSecret, Batch.Secret), in bytes: hosts send 32 hex
	// digits of 16 random bytes.
	MinSecretLen = 16
	MaxSecretLen = 64
	// MaxLimiters is the most limiters one configuration may hold.
	MaxLimiters = 256
	// MaxOverrides is the most per-key overrides one limiter may hold.
	MaxOverrides = 4096
	// MaxChecks is the most limiters one decision may check together.
	MaxChecks = 8
	// MaxBatchEntries is the most entries one sync batch or reply may hold.
	MaxBatchEntries = 8192
	// MaxCost is the largest cost of one decision.
	MaxCost = 1 << 40
	// MaxLimit is the largest limit or burst of a limiter.
	MaxLimit = 1 << 50
	// MinPeriod and MaxPeriod bound a limiter's period, in nanoseconds
	// (1 ms and 31 days).
	MinPeriod = int64(1e6)
	MaxPeriod = int64(31 * 24 * 3600 * 1e9)
	// DefaultSyncInterval is Config.SyncInterval when it is 0: 100 ms, ns.
	DefaultSyncInterval = int64(100e6)
	// MinSyncInterval and MaxSyncInterval bound Config.SyncInterval: 1 ms
	// and 1 h, ns.
	MinSyncInterval = int64(1e6)
	MaxSyncInterval = int64(3600e9)
	// MaxStandWindows is the most windows one standing lease stands in
	// (View.StandTo - View.Window): 16.
	MaxStandWindows = 16
	// DefaultMaxKeys is the default cap on keys one isolate tracks.
	DefaultMaxKeys = 100000
)

// Encoded sizes of a Reply's parts at their largest, in bytes: msgpack
// writes an int64 in at most 9 bytes, a string of MaxNameLen bytes with a
// 2-byte header (str8), one of MaxKeyLen bytes with a 3-byte header
// (str16), an array of MaxBatchEntries elements with a 3-byte header
// (array16). TestMaxReplyBytes encodes a reply with every part at its
// largest and checks the sum.
const (
	maxIntBytes    = 9
	maxNameBytes   = 2 + MaxNameLen
	maxKeyBytes    = 3 + MaxKeyLen
	maxArrayHeader = 3
	// a View: [limiter, key, window, count, prev, tat, lease, isolates,
	// stand, exhausted, life, limit, held, standto, pace]
	maxViewBytes = 1 + maxNameBytes + maxKeyBytes + 12*maxIntBytes + 1
	// an UpView: [limiter, key, pause, circuit, open, probe, limit, life]
	maxUpViewBytes = 1 + maxNameBytes + maxKeyBytes + 5*maxIntBytes + 1
	// a ResetKey: [limiter, key]
	maxResetBytes = 1 + maxNameBytes + maxKeyBytes
	// a LimiterPause: [limiter, left]
	maxPauseBytes = 1 + maxNameBytes + maxIntBytes
)

// MaxReplyBytes is the size of the largest Reply, in bytes (9,301,068, 8.87 MiB):
// MaxBatchEntries views, upstream views and reset keys and MaxLimiters
// paused limiters, each with a
// limiter name of MaxNameLen bytes, a key of MaxKeyLen bytes and every
// number at its longest, and every field of the reply's map. A reader of
// replies (the edge host's sync transport) must take this many bytes: a
// coordinator may answer a batch of MaxBatchEntries keys of MaxKeyLen bytes
// with a view and an upstream view of each (a paused limiter), well past
// the 4 MiB of the largest batch.
const MaxReplyBytes = 1 + // the map header (9 fields at most); each field's name is a fixstr
	3 + maxArrayHeader + MaxLimiters*maxPauseBytes + // "lp"
	3 + maxArrayHeader + MaxBatchEntries*maxUpViewBytes + // "up"
	3 + maxIntBytes + // "rg"
	3 + maxArrayHeader + MaxBatchEntries*maxResetBytes + // "rs"
	3 + 1 + // "ra"
	2 + maxIntBytes + 4 + maxIntBytes + 3 + maxIntBytes + // "v", "seq", "at"
	2 + maxArrayHeader + MaxBatchEntries*maxViewBytes // "e"
