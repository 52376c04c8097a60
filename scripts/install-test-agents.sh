#!/usr/bin/env bash
# Install the real agent CLIs the agent tests drive, from their own registries, into a cache:
#   Claude Code (@anthropic-ai/claude-code), Codex CLI (@openai/codex) and opencode
#   (opencode-ai) from npm into $DIR/npm (one local npm prefix)
#   mini-swe-agent from PyPI into its own virtualenv $DIR/mini-venv (it pulls in litellm)
# Reruns with the same pinned versions do nothing. Prints, last, the EVALQ_AGENT_PATH to use.
# Override the cache with EVALQ_TEST_AGENTS_DIR; the versions with CLAUDE_CODE_VERSION,
# CODEX_VERSION, OPENCODE_VERSION and MINI_SWE_AGENT_VERSION.
set -euo pipefail

DIR="${EVALQ_TEST_AGENTS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/evalq/test-agents}"
CLAUDE_CODE_VERSION="${CLAUDE_CODE_VERSION:-2.1.332}"
CODEX_VERSION="${CODEX_VERSION:-0.171.0}"
OPENCODE_VERSION="${OPENCODE_VERSION:-1.18.33}"
MINI_SWE_AGENT_VERSION="${MINI_SWE_AGENT_VERSION:-2.4.6}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$DIR"

stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

# --- Claude Code, Codex CLI, opencode (npm, one prefix) -------------------------------------
NPM_PACKAGES=("@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION"
              "opencode-ai@$OPENCODE_VERSION")
NPM_WANTED="${NPM_PACKAGES[*]}"
NPM_STAMP="$DIR/npm/.evalq-installed-agents"  # its own name: older copies of this script keep theirs
BIN="$DIR/npm/node_modules/.bin"
if ! stamp_ok "$NPM_STAMP" "$NPM_WANTED" || ! [ -x "$BIN/claude" ] || ! [ -x "$BIN/codex" ] \
    || ! [ -x "$BIN/opencode" ]; then
  command -v npm >/dev/null || { echo "install-test-agents: npm is missing (apt-get install -y npm)" >&2; exit 1; }
  mkdir -p "$DIR/npm"
  echo "install-test-agents: npm install $NPM_WANTED into $DIR/npm" >&2
  if ! npm install --prefix "$DIR/npm" --no-fund --no-audit --loglevel=error \
        "${NPM_PACKAGES[@]}" >&2; then
    echo "install-test-agents: npm install of $NPM_WANTED failed (registry: $(npm config get registry))" >&2
    exit 1
  fi
  echo "$NPM_WANTED" > "$NPM_STAMP"
fi
# each answers its version flag offline, with its update checks off and a throwaway home
CHECK_HOME="$(mktemp -d)"; mkdir -p "$CHECK_HOME/.codex"
trap 'rm -rf "$CHECK_HOME"' EXIT
for tool in claude codex opencode; do
  DISABLE_AUTOUPDATER=1 OPENCODE_DISABLE_AUTOUPDATE=1 CODEX_DISABLE_UPDATE_CHECK=1 \
    HOME="$CHECK_HOME" XDG_CONFIG_HOME="$CHECK_HOME/.config" XDG_DATA_HOME="$CHECK_HOME/.local" \
    XDG_CACHE_HOME="$CHECK_HOME/.cache" CODEX_HOME="$CHECK_HOME/.codex" \
    "$BIN/$tool" --version >/dev/null 2>&1 </dev/null \
    || { echo "install-test-agents: $tool --version failed after install" >&2; exit 1; }
done

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
