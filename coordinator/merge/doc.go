// Package merge is edgelimit's merge core and commit protocol: it merges the
// msgpack delta batches that isolates' sync_out produces, exactly once per
// (isolate, sequence number), into the state of every (limiter, key), and
// computes the replies (windowed counts or bucket state, plus a lease in
// strict mode). It imports no HTTP and no store driver.
//
//   - Merger (merge.go, apply.go, state.go, lease.go, strand.go, cache.go,
//     gc.go, upstream.go, resetlog.go, sketch.go, reserved.go, admin.go) is
//     the pure merge state machine: it takes the time as an argument,
//     reads and writes through the small Store interface (store.go) and
//     holds no goroutines. The simulator drives it under virtual time.
//   - The commit protocol (stage.go): Ready hands out what Apply changed as
//     one stage and, when one is due, a checkpoint; the caller writes them
//     and reports each outcome with Advance. The write path is
//     log-structured (wal.go): a stage is one log record with the new
//     state of every key it changed; checkpoints write the states to their
//     own records and delete the log; a restart replays what a crash left.
//   - Sequence numbers are dense per isolate, and a stale, jumped or
//     conflicting one applies nothing (sequence.go, ErrSequence); times
//     and windows may not run ahead of the clock by more than the allowed
//     skew (times.go, ErrClockSkew).
//   - SharedMerger (shared.go) merges over a SharedStore several
//     coordinators share (the Redis Cluster store), holding no state
//     between groups of batches.
//   - An Observer (the dashboard) is told of every applied batch.
//
// The stores (Pebble, Redis Cluster) implement Store and SharedStore; the
// coordinator's server (package coordinator) runs a Merger behind its HTTP
// API. Times are int64 nanoseconds; the window math is package limitmath's.
package merge
