// Package syncloop schedules an isolate's syncs with the coordinator: a
// regular interval with jitter, early syncs when the module asks for one
// (Decision.SyncWanted) no closer together than a minimum spacing, and
// exponential backoff after failures. The clock and the transport are
// injected, so the simulator drives the same code under virtual time and
// the edge host under real time.
//
// There are two layers:
//
//   - Scheduler is a pure state machine (no clock, no goroutines, no I/O):
//     the caller tells it what happened (Begin, Success, Failure, Idle,
//     Want) at what time, and asks it when the next sync is due (Next). The
//     simulator uses it directly, because its network is asynchronous
//     virtual time.
//   - Loop drives a Scheduler with a Clock, a Transport and a Module (the
//     isolate's SyncOut/SyncIn) in one goroutine, for the edge host.
//
// # Retries and buffering
//
// The module keeps at most one batch outstanding: until a reply is applied,
// its SyncOut returns the same batch again with the same sequence number,
// so a retry after a failure is exactly-once at the coordinator. The
// deltas cut after that batch wait inside the module, bounded by its key
// table (wire.Config.MaxKeys). Loop reuses one buffer for the outstanding
// batch and refuses a batch larger than Options.MaxBatchBytes, so the host
// side of the buffering is bounded too.
package syncloop
