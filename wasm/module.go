// Package wasm embeds the edgelimit edge module, built from ./guest by
// `make wasm`:
//
//	tinygo build -target=wasip1 -buildmode=c-shared -scheduler=none -no-debug -opt=2 -o wasm/edgelimit.wasm ./wasm/guest
//
// The built module is committed, so the host side builds and tests on a
// machine without TinyGo; `make test` rebuilds it and fails if the committed
// bytes differ (TinyGo output is deterministic).
//
// Subpackages: wire (the msgpack messages every component shares), core
// (the pure limiter core, the only place decisions are made) and guest (the
// module's exports, a thin layer over core).
package wasm

import _ "embed"

// Module is the edgelimit edge module (a WebAssembly binary).
//
//go:embed edgelimit.wasm
var Module []byte
