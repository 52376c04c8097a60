"""Real clients through the gateway, via a loopback forwarder as inside a sandbox: Claude Code
(from npm, as `make test` installs it) and the official openai package (installed with
mini-swe-agent). Every request is metered with exactly the server's usage, the agent holds only
the placeholder key, the real key reaches the server and appears nowhere the agent could see."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import replace

import pytest

from gateway_support import gateway, sock_dir, tcp_forwarder  # noqa: F401 (fixtures)
from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.workers.agents.claude_code import ClaudeCode
from evalq.workers.gateway import PLACEHOLDER_KEY, PROVIDERS

KEY = "sk-ant-api03-REAL-e2e-9d8c7b6a5f4e3d2c1b0a"
USAGE = {"input_tokens": 1234, "output_tokens": 56, "cache_read_tokens": 789,
         "cache_write_tokens": 321}
QUIET = ClaudeCode.quiet_env  # the adapter's: no telemetry, update checks or other traffic


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


SDK_SCRIPT = r"""
import json, sys
import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
tools = [{"type": "function", "name": "shell", "parameters": {"type": "object",
          "properties": {"command": {"type": "string"}}}}]
whole = client.responses.create(model="gpt-5", input="List the files.", tools=tools)
out = {"whole": {"text": whole.output_text, "usage": whole.usage.model_dump(),
                 "calls": [[i.name, i.arguments] for i in whole.output
                           if i.type == "function_call"]}}
with client.responses.stream(model="gpt-5", input="Now finish.", tools=tools) as stream:
    kinds = [event.type for event in stream]
    final = stream.get_final_response()
out["stream"] = {"kinds": kinds, "text": final.output_text, "usage": final.usage.model_dump()}
chunks = list(client.chat.completions.create(
    model="gpt-5", messages=[{"role": "user", "content": "hi"}], stream=True,
    stream_options={"include_usage": True}))
out["chat"] = {"usage": chunks[-1].usage.model_dump()}
print(json.dumps(out))
"""


def test_the_official_openai_sdk_reads_responses_and_chat_through_the_gateway(
        gateway, sock_dir, tmp_path):
    """The openai package (installed with mini-swe-agent's litellm) parses the model server's
    Responses API, whole and streamed with function calls, through the gateway."""
    python = os.path.join(os.path.dirname(shutil.which(
        "mini", path=os.environ.get("EVALQ_AGENT_PATH", "")) or ""), "python")
    if not os.path.exists(python):
        pytest.fail("mini-swe-agent's virtualenv is missing: bash scripts/install-test-agents.sh",
                    pytrace=False)
    usages = [{"input_tokens": 400, "output_tokens": 30, "cache_read_tokens": 100},
              {"input_tokens": 520, "output_tokens": 12, "cache_read_tokens": 0},
              {"input_tokens": 9, "output_tokens": 2, "cache_read_tokens": 4}]
    script = parse_script({"turns": [
        {"text": "Listing.", "tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}],
         "usage": usages[0]}, {"text": "Finished.", "usage": usages[1]},
        {"text": "hi", "usage": usages[2]}]})
    with ModelServer(script) as server:
        upstream = replace(PROVIDERS["openai"], url=server.url)
        run = gateway.open_run("sdk", sock_dir / "g.sock", upstreams=[upstream],
                               credentials={"OPENAI_API_KEY": KEY})
        with tcp_forwarder(str(sock_dir / "g.sock")) as port:
            done = subprocess.run([python, "-c", SDK_SCRIPT, f"http://127.0.0.1:{port}/v1",
                                   PLACEHOLDER_KEY], capture_output=True, text=True,
                                  timeout=60, env={"PATH": os.environ["PATH"],
                                                   "HOME": str(tmp_path)})
        assert done.returncode == 0, done.stderr[-3000:]
        out = json.loads(done.stdout)
        assert out["whole"]["calls"] == [["shell", '{"command": "ls"}']]
        assert out["whole"]["text"] == "Listing."
        assert out["whole"]["usage"]["input_tokens"] == 500  # cached ones included, as OpenAI
        assert out["stream"]["text"] == "Finished."
        assert out["stream"]["kinds"][0] == "response.created"
        assert out["stream"]["kinds"][-1] == "response.completed"
        assert "response.output_text.delta" in out["stream"]["kinds"]
        assert out["chat"]["usage"]["prompt_tokens"] == 13
        records = run.records()
        assert [r["wire"] for r in records] == ["openai-responses"] * 2 + ["openai-chat"]
        for record, usage in zip(records, usages, strict=True):
            assert {k: record[k] for k in usage} == usage
        assert {e.headers.get("Authorization") for e in server.exchanges} == {f"Bearer {KEY}"}
        assert KEY not in done.stdout + done.stderr
