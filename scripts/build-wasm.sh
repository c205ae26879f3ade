#!/usr/bin/env bash
# Builds the guest module with TinyGo into $1 (default wasm/edgelimit.wasm).
# Filters LLVM's harmless "not a recognized feature" warnings; fails on errors.
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
