#!/usr/bin/env bash
# Install the real agent CLIs the agent tests drive, from their own registries, into a cache:
#   Claude Code from npm (@anthropic-ai/claude-code) into $DIR/npm (a local npm prefix)
#   mini-swe-agent from PyPI into its own virtualenv $DIR/mini-venv (it pulls in litellm)
# Reruns with the same pinned versions do nothing. Prints, last, the EVALQ_AGENT_PATH to use.
# Override the cache with EVALQ_TEST_AGENTS_DIR; the versions with CLAUDE_CODE_VERSION and
# MINI_SWE_AGENT_VERSION.
set -euo pipefail

DIR="${EVALQ_TEST_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/evalq/test-agents}"
CLAUDE_CODE_VERSION="${CLAUDE_CODE_VERSION:-2.1.332}"
MINI_SWE_AGENT_VERSION="${MINI_SWE_AGENT_VERSION:-2.4.6}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$DIR"

stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

# --- Claude Code (npm) ---------------------------------------------------------------------
NPM_STAMP="$DIR/npm/.evalq-installed"
if ! stamp_ok "$NPM_STAMP" "$CLAUDE_CODE_VERSION" || ! [ -x "$DIR/npm/node_modules/.bin/claude" ]; then
  command -v npm >/dev/null || { echo "install-test-agents: npm is missing (apt-get install -y npm)" >&2; exit 1; }
  mkdir -p "$DIR/npm"
  echo "install-test-agents: npm install @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION into $DIR/npm" >&2
  if ! npm install --prefix "$DIR/npm" --no-fund --no-audit --loglevel=error \
        "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" >&2; then
    echo "install-test-agents: npm install of @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION failed (registry: $(npm config get registry))" >&2
    exit 1
  fi
  echo "$CLAUDE_CODE_VERSION" > "$NPM_STAMP"
fi
DISABLE_AUTOUPDATER=1 HOME="$DIR/npm" "$DIR/npm/node_modules/.bin/claude" --version >/dev/null \
  || { echo "install-test-agents: claude --version failed after install" >&2; exit 1; }

# --- mini-swe-agent (PyPI, own virtualenv) -------------------------------------------------
VENV="$DIR/mini-venv"
MINI_STAMP="$VENV/.evalq-installed"
if ! stamp_ok "$MINI_STAMP" "$MINI_SWE_AGENT_VERSION" || ! [ -x "$VENV/bin/mini" ]; then
  echo "install-test-agents: pip install mini-swe-agent==$MINI_SWE_AGENT_VERSION into $VENV" >&2
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  if ! "$VENV/bin/pip" install -q --disable-pip-version-check \
        "mini-swe-agent==$MINI_SWE_AGENT_VERSION" >&2 2> >(grep -v "is ignored: it is neither" >&2); then
    echo "install-test-agents: pip install of mini-swe-agent==$MINI_SWE_AGENT_VERSION failed" >&2
    exit 1
  fi
  echo "$MINI_SWE_AGENT_VERSION" > "$MINI_STAMP"
fi

echo "$DIR/npm/node_modules/.bin:$VENV/bin"
