#!/usr/bin/env bash
# Installs headless Chromium (the Debian package `chromium`) for the browser
# tests of the coordinator's /ui and the simulator's report.html
# (internal/browsertest). Idempotent: prints one line and exits when a
# Chromium is already on PATH (or $CHROMIUM is set). Tests skip with a clear
# message where it cannot be installed.
set -euo pipefail

say() { echo "install-chromium: $*"; }

if [ -n "${CHROMIUM:-}" ] && [ -x "$CHROMIUM" ]; then
  say "using \$CHROMIUM=$CHROMIUM"; exit 0
fi
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then say "$(command -v "$b") already installed"; exit 0; fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  say "no apt-get: install Chromium yourself (or set CHROMIUM); the browser tests will skip"; exit 0
fi
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
say "installing the Debian package chromium"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
say "$(command -v chromium) installed"
