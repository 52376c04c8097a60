#!/usr/bin/env bash
# Installs Debian's chromium when /usr/bin/chromium is missing: the HTML report's layout test
# (tests/report/test_html_chromium.py) measures the report in headless Chromium over DevTools.
# Only the browser: no chromium-driver, no Playwright download (the machine has no network
# beyond its apt mirror). Idempotent; `apt-get update` runs only when something is missing.
set -euo pipefail
say() { echo "ensure-chromium: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

if [ ! -x /usr/bin/chromium ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "run as root (or install sudo): apt-get install -y chromium"
    SUDO=sudo
  fi
  command -v apt-get >/dev/null 2>&1 || die "no apt-get; install Chromium so that /usr/bin/chromium exists"
  say "installing chromium"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq || die "apt-get update failed (is the Debian mirror reachable?)"
  $SUDO apt-get install -y -qq chromium >/dev/null || die "apt-get install chromium failed"
fi
/usr/bin/chromium --version >/dev/null 2>&1 || die "/usr/bin/chromium is installed but does not run"
