"""Adapters run directly in fresh profiles: process-group kill, credentials and redaction,
parsers of each agent's output, and `evalq agents list`."""

from __future__ import annotations

import json
import logging
import time
import uuid
from pathlib import Path

import pytest

from evalq.errors import UserError
from evalq.fixtures.fixture import load_fixture, materialize
from evalq.models import Condition, Limits
from evalq.proc import ProcResult
from evalq.workers.agents.base import AgentContext
from evalq.workers.agents.registry import ADAPTERS, get_adapter, validate_condition
from evalq.workers.profile import new_profile
from evalq.workers.redact import Redactor, RedactingFilter
from evalq.workers.sandbox import get_agent_sandbox
from evalq.workers.gateway import PLACEHOLDER_KEY
from evalq.workers.secrets import credentials, read_secrets_file
from test_agents_support import copy_fixture, run_cli  # noqa: F401


def _ctx(tmp_path, settings, agent="scripted", wall=30.0, **kw):
    fixture = load_fixture(copy_fixture("py-slugify-bugfix", tmp_path / "fx"))
    profile = new_profile(tmp_path / "runs")
    materialize(fixture, profile.workspace)
    return AgentContext(fixture=fixture, condition=Condition(name="c", agent=agent,
                                                             settings=settings, **kw),
                        profile=profile, prompt="fix it", limits=Limits(wall_seconds=wall))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _sleepers(seconds: str) -> list[int]:
    """Host pids of live `sleep SECONDS` processes (the agent's grandchild, seen from outside:
    the pid it reports is one of its own pid namespace)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == \
                    f"sleep\0{seconds}\0".encode() and _alive(int(proc.name)):
                found.append(int(proc.name))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_wall_limit_kills_the_whole_process_group(tmp_path, sandbox):
    seconds = 60 + uuid.uuid4().int % 1000 / 1000  # the grandchild sleeps seconds + 60
    ctx = _ctx(tmp_path, {"action": "sleep", "seconds": seconds, "spawn_child": True}, wall=2)
    ctx.sandbox = sandbox
    started = time.monotonic()
    result = get_adapter("scripted").run(ctx)
    assert time.monotonic() - started < 20
    assert result.timed_out and result.stop_reason == "wall time limit of 2 s"
    assert any('"child"' in l for l in result.stdout.decode().splitlines())
    deadline = time.monotonic() + 10
    while _sleepers(str(seconds + 60)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _sleepers(str(seconds + 60)), "the agent's grandchild survived the wall-time kill"


def test_credential_from_secrets_file_is_passed_and_redacted(tmp_path, monkeypatch):
    secret = "sk-file-secret-0123456789abcdef"
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"# provider keys\nexport OPENAI_API_KEY='{secret}'\n")
    secrets.chmod(0o644)
    with pytest.raises(UserError, match="chmod 600"):
        read_secrets_file(secrets)
    secrets.chmod(0o600)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("EVALQ_SECRETS_FILE", str(secrets))
    assert credentials(["OPENAI_API_KEY", "NOT_THERE"]) == {"OPENAI_API_KEY": secret}
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-wins-0123456789")
    assert credentials(["OPENAI_API_KEY"]) == {"OPENAI_API_KEY": "sk-env-wins-0123456789"}
    monkeypatch.delenv("OPENAI_API_KEY")
    # unsealed (sandbox `none`, debugging): the agent gets the key, and every copy is masked
    ctx = _ctx(tmp_path, {"action": "noop", "credential_env": ["OPENAI_API_KEY"],
                          "echo_env": ["OPENAI_API_KEY"]})
    ctx.sandbox = "none"
    result = get_adapter("scripted").run(ctx)
    assert ctx.profile.env["OPENAI_API_KEY"] == secret  # the agent got it
    for blob in (result.stdout, result.stderr, result.transcript,
                 result.final_report.encode(), (ctx.workspace / "leak.txt").read_bytes()):
        assert secret.encode() not in blob and b"[REDACTED]" in blob
    # sealed: the agent gets only the placeholder; the key never enters the sandbox
    sealed = _ctx(tmp_path / "s", {"action": "noop", "credential_env": ["OPENAI_API_KEY"],
                                   "echo_env": ["OPENAI_API_KEY"]})
    result = get_adapter("scripted").run(sealed)
    assert sealed.profile.env["OPENAI_API_KEY"] == PLACEHOLDER_KEY
    assert (sealed.workspace / "leak.txt").read_text() == f"OPENAI_API_KEY={PLACEHOLDER_KEY}\n"
    assert secret.encode() not in result.stdout + result.stderr
    # and an agent not asking for it never sees it
    other = _ctx(tmp_path / "o", {"action": "noop", "echo_env": ["OPENAI_API_KEY"]})
    get_adapter("scripted").run(other)
    assert "OPENAI_API_KEY" not in other.profile.env


def test_redactor_masks_nested_values_and_log_records():
    redactor = Redactor(["secret-value-1234", "short"])
    assert redactor.obj({"a": ["x secret-value-1234 y"], "secret-value-1234": 1}) == \
        {"a": ["x [REDACTED] y"], "[REDACTED]": 1}
    assert redactor.text("short stays") == "short stays"  # too short to be a credential
    record = logging.LogRecord("t", logging.INFO, "f", 1, "key=%s", ("secret-value-1234",),
                               None)
    RedactingFilter(redactor).filter(record)
    assert record.getMessage() == "key=[REDACTED]"


def _proc(stdout: bytes, code: int = 0) -> ProcResult:
    return ProcResult(exit_code=code, stdout=stdout, stderr=b"", duration_seconds=1.0,
                      timed_out=False, output_exceeded=False, signal=None)


def test_codex_and_opencode_parsers_read_usage_and_leave_gaps_none(tmp_path):
    ctx = _ctx(tmp_path, {}, agent="codex", model="gpt-5")
    lines = [{"type": "thread.started"},
             {"type": "item.completed", "item": {"type": "command_execution", "exit_code": 1,
                                                 "status": "failed"}},
             {"type": "item.completed", "item": {"type": "file_change", "status": "completed"}},
             {"type": "item.completed", "item": {"type": "agent_message", "text": "done"}},
             {"type": "turn.completed", "usage": {"input_tokens": 1200,
                                                  "cached_input_tokens": 200,
                                                  "output_tokens": 90}}]
    out = get_adapter("codex").parse(ctx, _proc("\n".join(map(json.dumps, lines)).encode()))
    m = out.metrics
    assert (m.input_tokens, m.cache_read_tokens, m.output_tokens) == (1000, 200, 90)
    assert m.cache_write_tokens is None and (m.tool_calls, m.tool_failures) == (2, 1)
    assert out.final_report == "done"
    silent = get_adapter("codex").parse(ctx, _proc(b"banner only\n", code=1))
    assert silent.metrics.input_tokens is None and silent.metrics.tool_calls is None
    oc = [{"type": "tool_use", "part": {"type": "tool", "tool": "edit",
                                        "state": {"status": "error"}}},
          {"type": "text", "part": {"type": "text", "text": "all done"}},
          {"type": "step_finish", "part": {"type": "step-finish", "reason": "stop", "cost": 0.01,
                                           "tokens": {"input": 50, "output": 7,
                                                      "cache": {"read": 3, "write": 4}}}}]
    res = get_adapter("opencode").parse(ctx, _proc("\n".join(map(json.dumps, oc)).encode()))
    assert (res.metrics.input_tokens, res.metrics.cache_write_tokens) == (50, 4)
    assert res.metrics.reported_cost_usd == 0.01 and res.metrics.tool_failures == 1
    assert res.final_report == "all done" and res.stop_reason == "stop"


def test_command_template_runs_argv_and_reads_its_usage_file(tmp_path):
    script = ('printf "%s" "{prompt}" > got.txt; '
              'echo \'{{"input_tokens": 12, "output_tokens": 3}}\' > {output_dir}/usage.json; '
              'echo finished > {output_dir}/report.txt')
    settings = {"argv": ["sh", "-c", script]}
    assert validate_condition(Condition(name="c", agent="command", settings=settings)) is None
    assert validate_condition(Condition(name="c", agent="command",
                                        settings={"argv": ["x", "{nope}"]}))[0] == "settings.argv"
    ctx = _ctx(tmp_path, settings, agent="command", model="gpt-5")
    result = get_adapter("command").run(ctx)
    assert (ctx.workspace / "got.txt").read_text() == "fix it"
    assert (result.metrics.input_tokens, result.metrics.output_tokens) == (12, 3)
    assert result.metrics.cache_read_tokens is None and result.final_report == "finished\n"
    # gpt-5 charges cache reads, which this command did not report: cost stays unavailable
    assert result.metrics.cost_usd is None


def test_claude_code_settings_and_profile_config(tmp_path):
    assert validate_condition(Condition(name="c", agent="claude-code",
                                        settings={"base_url": 5}))[0] == "settings.base_url"
    skill = tmp_path / "skills" / "inventory-helper"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: inventory-helper\n---\n")
    ctx = _ctx(tmp_path, {"base_url": "http://127.0.0.1:9", "instructions": "Be brief."},
               agent="claude-code", model="claude-sonnet-4-5", skill=str(skill))
    adapter = get_adapter("claude-code")
    adapter.prepare(ctx)
    config = ctx.profile.home / ".claude"
    assert (config / "skills" / "inventory-helper" / "SKILL.md").is_file()
    assert (config / "CLAUDE.md").read_text() == "Be brief."
    assert json.loads((config / "settings.json").read_text())["env"]["DISABLE_TELEMETRY"] == "1"
    ctx.model_url = get_agent_sandbox("bwrap").model_url(ctx.settings["base_url"])
    assert adapter.environment(ctx)["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8976"  # the door
    ctx.model_url = get_agent_sandbox("none").model_url(ctx.settings["base_url"])
    assert adapter.environment(ctx)["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    events = [{"type": "assistant", "message": {"id": "m1", "content": [
        {"type": "tool_use", "id": "t1", "name": "Skill",
         "input": {"skill": "inventory-helper"}}],
        "usage": {"input_tokens": 10, "output_tokens": 1}}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1",
                                                  "is_error": True}]}},
        {"type": "result", "subtype": "error_max_turns", "num_turns": 9,
         "usage": {"input_tokens": 10, "output_tokens": 1}}]
    res = adapter.parse(ctx, _proc("\n".join(map(json.dumps, events)).encode()))
    # the Skill call failed: its content never reached the agent, so it is no activation
    assert res.metrics.skill_loaded is False and res.metrics.tool_failures == 1
    events[1]["message"]["content"][0]["is_error"] = False
    assert adapter.parse(ctx, _proc("\n".join(map(json.dumps, events)).encode())
                         ).metrics.skill_loaded is True
    assert res.timed_out and res.stop_reason == "max turns reached"
    assert res.metrics.cache_read_tokens is None  # not reported ⇒ unavailable


def test_agents_list_shows_every_adapter_and_where_it_is(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "codex").write_text("#!/bin/sh\necho codex 0.0\n")
    (fake / "codex").chmod(0o755)
    proc = run_cli(["agents", "list", "--json"], {"EVALQ_AGENT_PATH": str(fake),
                                                  "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert set(rows) == set(ADAPTERS) >= {"claude-code", "codex", "opencode", "mini-swe-agent",
                                          "command", "scripted"}
    assert rows["codex"]["installed"] and rows["codex"]["where"] == str(fake / "codex")
    assert not rows["opencode"]["installed"]
    assert rows["scripted"]["where"] == "built in"
