#!/usr/bin/env bash
# Installs TinyGo (built from its Go module against Debian's LLVM 19) into a
# project-local directory, using only Debian packages and the Go module proxy.
# Idempotent: prints one line and exits when TinyGo is already installed.
# Recipe (the numbered steps below): Debian's LLVM 19, wasi-libc and binaryen
# packages; TinyGo's source from the Go module proxy, built with
# -tags=llvm19 against that LLVM; TinyGo's cache seeded with Debian's
# prebuilt wasi-libc and compiler-rt, whose sources the module zip lacks.
set -euo pipefail

TINYGO_VERSION="${TINYGO_VERSION:-0.41.1}"
top="$(cd "$(dirname "$0")/.." && pwd)"
root="${TINYGOROOT:-$top/.tools/tinygo-$TINYGO_VERSION}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tinygo"
pkgs=(llvm-19-dev libclang-19-dev lld-19 clang-19 wasi-libc libclang-rt-19-dev-wasm32 binaryen)

say() { echo "install-tinygo: $*"; }

# 1. Debian packages (only the missing ones).
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  say "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2-3. TinyGo from the Go module proxy, built against LLVM 19.
if [ ! -x "$root/bin/tinygo" ]; then
  say "fetching github.com/tinygo-org/tinygo@v$TINYGO_VERSION from the Go module proxy"
  src="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/tinygo-org/tinygo@v$TINYGO_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [ -d "$src" ] || { say "go mod download gave no directory"; exit 1; }
  rm -rf "$root.tmp"
  mkdir -p "$(dirname "$root")"
  cp -r "$src" "$root.tmp"
  chmod -R u+w "$root.tmp"
  # src/net is a submodule missing from the module zip; one empty package is enough.
  mkdir -p "$root.tmp/src/net"
  [ -f "$root.tmp/src/net/net.go" ] || echo "package net" >"$root.tmp/src/net/net.go"
  say "building tinygo (a few minutes, once)"
  (cd "$root.tmp" && CGO_ENABLED=1 PATH=/usr/lib/llvm-19/bin:$PATH go build -tags=llvm19 -o bin/tinygo .)
  rm -rf "$root"
  mv "$root.tmp" "$root"
  say "built $root/bin/tinygo"
fi

# 4. Seed TinyGo's cache with Debian's prebuilt wasi-libc and compiler-rt
#    (their sources are submodules missing from the module zip).
libc="$cache/wasi-libc-wasm32-unknown-wasi-generic"
if [ ! -f "$libc/lib.a" ]; then
  mkdir -p "$libc"
  cp /usr/lib/wasm32-wasi/libc.a "$libc/lib.a"
  cp /usr/lib/wasm32-wasi/crt1*.o "$libc/"
  rm -rf "$libc/include"
  cp -r /usr/include/wasm32-wasi "$libc/include"
  say "seeded $libc"
fi
crt="$cache/compiler-rt-wasm32-unknown-wasi-generic"
if [ ! -f "$crt/lib.a" ]; then
  mkdir -p "$crt"
  cp /usr/lib/llvm-19/lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a "$crt/lib.a"
  say "seeded $crt"
fi

say "tinygo $TINYGO_VERSION ready at $root/bin/tinygo"
