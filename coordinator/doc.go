// Package coordinator is edgelimit's source of truth for global counts: it
// merges the msgpack delta batches that isolates' sync_out produces, exactly
// once per (isolate, sequence number), persists them in Pebble with a synced
// commit before replying, and answers with the global view of every key in
// the batch (windowed counts or bucket state, plus a lease in strict mode).
//
// The merge itself is package merge (coordinator/merge): the Merger, its
// commit protocol and log, leases, sequence and time checks, and the
// shared-mode merger; this package is the server around it:
//
//   - Coordinator (coordinator.go) runs one committer goroutine around a
//     merge.Merger: concurrent Sync calls are group-committed, so one fsync
//     covers every batch that arrived while the previous commit was in
//     flight; checkpoints are committed by their own goroutine, in
//     throttled chunks.
//   - Package pebblestore (coordinator/pebblestore) is the merge.Store on
//     Pebble, on disk or on vfs.NewMem(), and reports Pebble's background
//     errors; Open uses it unless Options.Store is given.
//   - Package redisstore (coordinator/redisstore) is a merge.SharedStore
//     on a Redis Cluster (the command opens it for --store redis://...):
//     over it a Coordinator runs in shared mode (merge.SharedMerger,
//     sharedsync.go), holding no state between groups of batches, so
//     several coordinators serve the same isolates and keys; each bucket's
//     part of a group is written by one Lua script that checks key
//     versions and the isolates' marks in that hash slot.
//   - Handler (http.go) is the HTTP API: POST /v1/sync, the admin key
//     endpoints, /healthz and /metrics, and the dashboard's routes.
//   - Package dashboard (coordinator/dashboard) is the page GET /ui and its
//     JSON API: the Merger feeds it each applied batch through the
//     merge.Observer interface, and it reads the coordinator through its
//     own Source interface (dashsource.go), so the merge does not know it.
//   - No client can blind another's counts: each bearer token is its own
//     namespace of isolate ids (scope.go); an isolate id is bound to its
//     incarnation's secret by its first batch, and a batch without it gets
//     a 409 that tells no sequence number; sequence numbers are dense, and
//     a stale, jumped or conflicting one applies nothing and gets a 409 the
//     isolate answers with a new incarnation (merge.ErrSequence).
//   - Token roles (roles.go): without Options.Grants every token may do
//     everything; a Grant gives a token the edge (sync, per limiter), read
//     or admin role only, and a request beyond them gets 403.
//   - Live control (control.go): an operator changes limits and overrides
//     or pauses a limiter or key fleet-wide at run time (the API in
//     control_http.go, the dashboard's panel, ReloadConfig on SIGHUP); the
//     limits in force live in merge.Limits, the changes in a stored
//     control record, and each change is logged as an audit line.
//   - Store health (health.go): commit failures and Pebble's background
//     errors make /healthz and sync answer 503 until writes succeed again.
//
// The `edgelimit coordinator` command (flags, environment, process
// tuning) lives in cmd/edgelimit. Times are int64 nanoseconds.
package coordinator
