// Package sim is edgelimit's discrete-event simulator: it answers "what
// overrun, false rejections and sync cost will I get with this sync interval
// and mode?" by running the real edge module (N wazero isolates of the
// embedded wasm, through edge/isolate) and the real coordinator (in-process,
// Pebble on an in-memory filesystem) under virtual time. There is no second
// model of the algorithms: when the module or the coordinator change, the
// numbers change with them.
//
// # Time and determinism
//
// Time is virtual (int64 ns). Nothing sleeps: requests come from traffic
// sources in time order, and the network's deliveries, timeouts, sync
// timers and isolate evictions come from an event heap ordered by (time,
// insertion number). Every random draw comes from math/rand/v2 PCG streams
// seeded from the run's seed: traffic, network and churn use separate
// streams, so every strategy sees the very same requests. The same
// scenario, seed and flags give byte-identical output.
//
// # Strategies
//
//   - local-only: the real isolates, never synced (each decides alone).
//   - central: one real isolate stands in for a central counter that every
//     request asks; exact, but each request pays a network round trip
//     (plus timeouts and retries on loss).
//   - location: one real isolate per location is the location's shared
//     counter (like the Workers rate-limit binding), synced with the real
//     coordinator at the interval, never early.
//   - approximate: edgelimit, every limiter in approximate mode, synced by
//     edge/syncloop with early syncs when the module asks.
//   - strict: edgelimit, every limiter in strict (lease) mode.
//
// # Measurements
//
// The simulator keeps the true global count of every (limiter, key, window)
// (windows are the limiter's period, aligned to 0) and reports per strategy
// and sync interval: overrun (admitted beyond the window's capacity: the
// limit, or limit+burst for bucket algorithms), false rejections (denied
// while the true count plus the cost fitted), utilisation, sync requests
// and bytes per second, per-request added latency and coordinator writes.
// See Result for the exact definitions.
package sim
