#!/usr/bin/env bash
# Installs the Prometheus server and promtool from Debian (package
# prometheus) when they are missing: `make test` checks the alert rules
# (deploy/prometheus) with `promtool test rules`, and a coordinator test
# scrapes a live coordinator with the real `prometheus` binary. Idempotent
# and quiet when installed; a failed install is reported, not fatal here
# (the rules check and the scrape test then fail under CI=true, and skip
# saying why otherwise).
set -uo pipefail
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
if $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null; then
  # The package's service is not needed: the tests run their own server.
  $sudo systemctl disable --now prometheus >/dev/null 2>&1 || true
  echo "install-prometheus: $(prometheus --version 2>&1 | head -1)"
else
  echo "install-prometheus: could not install prometheus; the alert rules check and the scrape test will fail under CI=true and skip otherwise" >&2
fi
