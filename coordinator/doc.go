// Package coordinator is edgelimit's source of truth for global counts: it
// merges the msgpack delta batches that isolates' sync_out produces, exactly
// once per (isolate, sequence number), persists them in Pebble with a synced
// commit before replying, and answers with the global view of every key in
// the batch (windowed counts or bucket state, plus a lease in strict mode).
//
// The package is layered so the merge logic can run without a server:
//
//   - Merger (merge.go) is the pure merge state machine: it takes the time as
//     an argument, reads and writes through the small Store interface
//     (store.go) and holds no goroutines. The simulator drives it under
//     virtual time.
//   - The write path is log-structured (wal.go): a group commit writes one
//     log record with the new state of every key it changed (one synced
//     Pebble write, one memtable entry), and checkpoints later write the
//     states to their own records in the background and delete the log;
//     a restart replays what a crash left in the log.
//   - PebbleStore (pebble.go) is the Store on Pebble, on disk or on
//     vfs.NewMem().
//   - RedisStore (redis.go) is a SharedStore on a Redis Cluster: over it a
//     Coordinator runs in shared mode (shared.go), holding no state between
//     groups of batches, so several coordinators serve the same isolates
//     and keys; each bucket's part of a group is written by one Lua script
//     that checks key versions and the isolates' marks in that hash slot.
//   - Coordinator (coordinator.go) runs one committer goroutine around a
//     Merger: concurrent Sync calls are group-committed, so one fsync covers
//     every batch that arrived while the previous commit was in flight;
//     checkpoints are committed by their own goroutine, in throttled chunks.
//   - Handler (http.go) is the HTTP API: POST /v1/sync, the admin key
//     endpoints, /healthz and /metrics, and the dashboard's routes.
//   - Package dashboard (coordinator/dashboard) is the page GET /ui and its
//     JSON API: the Merger feeds it each applied batch through the Observer
//     interface, and it reads the coordinator through its own Source
//     interface (dashsource.go), so the merge does not know it.
//   - No client can blind another's counts: each bearer token is its own
//     namespace of isolate ids (scope.go); sequence numbers are dense, and a
//     stale, jumped or conflicting one applies nothing and gets a 409 the
//     isolate answers with a new incarnation (sequence.go); times and
//     windows may not run ahead of the clock by more than the allowed skew
//     (times.go).
//   - Store health (health.go): commit failures and Pebble's background
//     errors make /healthz and sync answer 503 until writes succeed again.
//   - Shared mode (shared.go, redis.go): several stateless coordinators
//     over one Redis Cluster.
//   - Upstream feedback (upstream.go): pauses, the circuit and announced
//     limits merged from the isolates' signals.
//
// The `edgelimit coordinator` command (flags, environment, process
// tuning) lives in cmd/edgelimit. Times are int64 nanoseconds; the window
// math is package limitmath's.
package coordinator
