#!/usr/bin/env bash
# Installs redis-server from Debian when it is missing: the benchmarks'
# Redis peers start their own redis-server on loopback. Idempotent and
# quiet when installed; a failed install is reported, not fatal (the
# benchmarks and tests that need Redis then skip and say why).
set -uo pipefail
command -v redis-server >/dev/null 2>&1 && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
if $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null; then
  # The package's service is not needed: the benchmarks run their own.
  $sudo systemctl disable --now redis-server >/dev/null 2>&1 || true
  echo "install-redis: $(redis-server --version | cut -d' ' -f1-3)"
else
  echo "install-redis: could not install redis-server; Redis benchmarks and tests will skip" >&2
fi
