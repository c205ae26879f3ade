// Package isolate runs the edgelimit edge module under wazero: it compiles
// the embedded module once (Runtime) and instantiates isolates from it
// (Isolate), each its own module instance with its own linear memory and a
// memory limit. The simulator, the edge host and the benchmarks all run the
// module through this package.
//
// # Why raw wazero and not the Extism Go SDK
//
// Measured by `go run ./cmd/edgelimit bench` on the project's 2-core
// machine: the Extism SDK's Plugin.Call of the same decision costs about
// 550 times a cached wazero call of the scalar export and allocates about
// 280 KB per call, because it looks the export up and copies input and
// output through the Extism kernel every time (an earlier measurement of
// the same comparison: ~36 µs against ~110 ns). A cached api.Function called with scalar
// arguments allocates nothing. The decision is made on every request, so
// Isolate keeps the module's scalar exports (el_decide, el_sync_out, ...)
// as cached api.Functions and moves keys and batches through buffers in
// guest memory.
//
// The module is a go-pdk plugin and imports eight functions of the Extism
// kernel ("extism:host/env": alloc, store_u8, store_u64, input_length,
// input_load_u8, input_load_u64, output_set, error_set). This package
// provides them in Go (kernel.go), so the module's Extism-style exports
// (configure, decide, sync_out, sync_in, stats, reset) also work here
// through Isolate.CallExtism, and the tests check them against the real
// Extism Go SDK.
//
// # Faults
//
// A trap inside an isolate is returned as an error wrapping ErrTrap for that
// call, and the isolate restarts itself: a fresh instance with the same
// configuration and a new isolate id (its unsynced deltas are lost, as when
// an edge runtime evicts an isolate). It never takes the process down.
package isolate
