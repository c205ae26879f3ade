#!/usr/bin/env bash
# Installs Chromium from Debian when it is missing: the dashboard's and the
# simulator report's tests render them in headless Chromium. Idempotent and
# quiet when installed; a failed install is reported, not fatal (the
# browser tests then skip and say why).
set -uo pipefail
for b in chromium chromium-browser google-chrome; do
  command -v "$b" >/dev/null 2>&1 && exit 0
done
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
if $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null; then
  echo "install-chromium: $(chromium --version 2>/dev/null)"
else
  echo "install-chromium: could not install chromium; the browser tests will skip" >&2
fi
