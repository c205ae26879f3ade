// Package core is the pure limiter core of edgelimit: the only place a
// decision is made. It has no I/O, no clock, no goroutines and no locks, and
// compiles both natively (for tests and tools) and for the TinyGo guest
// module, whose exports are a thin layer over a Core.
//
// Time is always passed in by the caller, as int64 nanoseconds; the core
// never reads a clock, so the simulator controls time completely.
//
// A Core tracks state per (limiter, key): the last global view the
// coordinator sent, the local cost not yet acknowledged by the coordinator
// (split into pending, not yet in a batch, and in flight), and in strict mode
// the lease balance. SyncOut cuts a batch of pending deltas; SyncIn applies
// the coordinator's reply. At most one batch is in flight: until its reply
// arrives, SyncOut returns the same bytes again (a retry with the same
// sequence number), so the coordinator can apply each batch exactly once.
//
// The key table is bounded (Config.MaxKeys, default wire.DefaultMaxKeys). When
// it is full, a CLOCK sweep evicts a key not used recently, preferring keys
// with nothing left to sync; a flood of unique keys evicts old state instead
// of growing memory.
package core
