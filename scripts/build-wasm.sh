#!/usr/bin/env bash
# Builds the guest module with TinyGo into $1 (default wasm/edgelimit.wasm).
# Filters LLVM's harmless "not a recognized feature" warnings; fails on errors.
#
# Size budget (README "Measured figures", checked by benchmarks/readme_test.go): <= 240 KB.
# What each option does to the module (220,959 bytes with the flags below; TinyGo 0.41.1,
# binaryen 108's wasm-opt, measured for issue 20; CPU time per operation, medians of 6-7
# interleaved rounds on the loaded 2-core VM, ratios to this build in the same rounds):
#   -opt=s                               169,540 bytes
#   -opt=z                               163,867  decisions 1.2-1.4x CPU, compile 0.55x
#   -opt=2 -panic=trap                   211,055  (a panic traps without printing its message)
#   -opt=2 -gc=conservative              219,434  (changes what the collector keeps: not used)
#   -opt=2 -gc=leaking                   181,890  (never frees memory: not an option)
#   -opt=z -panic=trap                   157,973  decisions 1.2-1.4x, compile 0.5-0.55x
#   -opt=z, then wasm-opt -Oz            153,348  decisions 1.35-1.4x, compile 0.55x (drops the name
#                                                 section: traps show function indices, not names)
#   -opt=s -panic=trap, wasm-opt -Oz     155,371  decisions 0.94-1.3x, compile 0.5-0.6x
#   -opt=s, then wasm-opt -Oz            160,351  decisions 1.5x in its one run
#   -opt=2, then wasm-opt -Oz            211,756
# Instantiating an isolate took the same time with every build (within this VM's noise). wazero
# compiles the module once per host process (190-220 ms of CPU for this build); Node 20's
# `new WebAssembly.Module` takes 0.07-0.08 ms for any of them (V8 compiles functions lazily).
# Upload: 97 KB gzipped (78 KB for the smallest). -scheduler=none and -no-debug are already set.
# Decisions are the design's figure, so the build keeps -opt=2 and the README states the budget.
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$top/wasm/edgelimit.wasm}"
tinygo="${TINYGO:-$top/.tools/tinygo-0.41.1/bin/tinygo}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
cd "$top"
if ! PATH=/usr/lib/llvm-19/bin:$PATH "$tinygo" build -target=wasip1 -buildmode=c-shared \
  -scheduler=none -no-debug -opt=2 -o "$out" ./wasm/guest 2>"$log"; then
  grep -v 'is not a recognized feature' "$log" >&2 || true
  echo "build-wasm: tinygo build failed" >&2
  exit 1
fi
grep -v 'is not a recognized feature' "$log" >&2 || true
