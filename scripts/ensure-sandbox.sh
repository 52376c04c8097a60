#!/usr/bin/env bash
# Installs what the bubblewrap grading sandbox needs when it is missing: bubblewrap, and the
# system Python with pytest, Node.js and make/gcc that hidden tests run with inside it.
set -euo pipefail
need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
/usr/bin/python3 -c 'import pytest' >/dev/null 2>&1 || need+=(python3 python3-pytest)
command -v make >/dev/null 2>&1 || need+=(make)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v node >/dev/null 2>&1 || need+=(nodejs)
# debootstrap builds the toolchain rootfs trees bubblewrap grades in (build-grader-images.sh).
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
# With --test: what only the test suite needs (Chromium: scripts/ensure-chromium.sh).
if [ "${1:-}" = "--test" ]; then
  # opencode's skill, grep and glob tools run ripgrep; without one on PATH it downloads its own
  command -v rg >/dev/null 2>&1 || need+=(ripgrep)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "evalq: missing ${need[*]}; install them (as root: apt-get install -y ${need[*]})" >&2
    exit 1
  fi
  echo "evalq: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
