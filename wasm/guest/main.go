//go:build wasip1

// Command guest is the edgelimit edge module: a TinyGo-built Extism plugin
// whose exports are a thin layer over the limiter core (package core). Build
// it with `make wasm`:
//
//	tinygo build -target=wasip1 -buildmode=c-shared -scheduler=none -no-debug -opt=2 -o wasm/edgelimit.wasm ./wasm/guest
//
// Two sets of exports decide the same way:
//
//   - Scalar exports (el_*) for hosts that call exports directly (wazero,
//     JavaScript): the key goes into a buffer in guest memory whose address
//     el_key_buf returns, the decision comes back as a status word and in a
//     fixed result buffer (el_result_buf). Nothing is allocated per call.
//   - Extism-style exports (configure, decide, sync_out, sync_in, stats,
//     reset) that take and give msgpack through the Extism kernel, for any
//     Extism host.
//
// See abi.go for the layouts.
package main

import (
	"github.com/edgelimit/edgelimit/wasm/core"
)

// lim is the isolate's limiter core; nil until configured.
var lim *core.Core

func main() {}
