"""Real Claude Code (from npm, as `make test` installs it) through the gateway: every request it
makes is metered with exactly the server's usage, the key it was given is a placeholder, the
real key reaches the server and appears nowhere in what Claude Code printed."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace

import pytest

from gateway_client import tcp_forwarder
from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.workers.gateway import PLACEHOLDER_KEY, PROVIDERS

KEY = "sk-ant-api03-REAL-e2e-9d8c7b6a5f4e3d2c1b0a"
USAGE = {"input_tokens": 1234, "output_tokens": 56, "cache_read_tokens": 789,
         "cache_write_tokens": 321}
QUIET = {"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
         "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_BUG_COMMAND": "1"}


@pytest.fixture
def claude():
    path = shutil.which("claude", path=os.environ.get("EVALQ_AGENT_PATH", ""))
    if path is None:
        pytest.fail("Claude Code is not installed: export EVALQ_AGENT_PATH=\"$(bash "
                    "scripts/install-test-agents.sh)\"", pytrace=False)
    return path


def test_claude_code_through_the_gateway(claude, gateway, sock_dir, tmp_path):
    script = parse_script({"fallback": {"text": "Hello from the scripted model.",
                                        "usage": USAGE}})
    with ModelServer(script) as server:
        upstream = replace(PROVIDERS["anthropic"], url=server.url)  # the provider, played here
        run = gateway.open_run("cc", sock_dir / "g.sock", upstreams=[upstream],
                               credentials={"ANTHROPIC_API_KEY": KEY})
        with tcp_forwarder(str(sock_dir / "g.sock")) as port:
            home = tmp_path / "home"
            home.mkdir()
            env = {"PATH": os.environ["PATH"], "HOME": str(home), **QUIET,
                   "CLAUDE_CONFIG_DIR": str(home / ".claude"),
                   "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}",
                   "ANTHROPIC_API_KEY": PLACEHOLDER_KEY}
            done = subprocess.run([claude, "-p", "Say hello.", "--output-format",
                                   "stream-json", "--verbose", "--model",
                                   "claude-sonnet-4-5"], env=env, cwd=tmp_path,
                                  capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Hello from the scripted model." in done.stdout
        calls = [r for r in run.records() if r["wire"] == "anthropic-messages"]
        assert calls and len(calls) == len(server.exchanges)
        for record in calls:
            assert {k: record[k] for k in USAGE} == USAGE and record["status"] == 200
        assert run.totals()["input_tokens"] == server.reported()["input_tokens"]
        assert {e.headers.get("x-api-key") for e in server.exchanges} == {KEY}
        everything = done.stdout + done.stderr + "".join(
            p.read_text(errors="replace") for p in home.rglob("*") if p.is_file())
        assert KEY not in everything
