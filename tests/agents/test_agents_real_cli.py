"""Real agent CLIs from their registries (Claude Code, Codex CLI and opencode from npm,
mini-swe-agent from PyPI) run a fixture end to end, with the model ids their users write,
against a provider as strict as the real ones on loopback (tests/gateway/strict_provider.py:
documented paths only, the provider's own auth headers, bodies it accepts), in one study: the
agent edits the workspace with its own tools, the run is graded, and the provider's usage
arrives in the DB and report. Each agent also runs once against a provider that reports no
usage at all: its tokens and cost are null, never 0, and the gateway charges each of its
calls at its worst case, which may spend the cost limit and stop the run."""

from __future__ import annotations

import gzip
import json
import math
import sys
from contextlib import ExitStack
from dataclasses import replace
from html import escape

import pytest


from pathlib import Path

from evalq.modelserver.script import parse_script
from evalq.pricing import load_price_table
from evalq.report.transcripts import page_name
from evalq.workers.agents.context_estimate import CHARS_PER_TOKEN, message_chars
from test_agents_support import (agent_path, artifact, attempts, copy_fixture,  # noqa: F401
                                 inventory_solution, run_study, write_manifest)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gateway"))
from strict_provider import StrictProvider  # noqa: E402

CLAUDE_USAGE = [
    {"input_tokens": 1500, "output_tokens": 60, "cache_read_tokens": 0,
     "cache_write_tokens": 900},
    {"input_tokens": 2345, "output_tokens": 456, "cache_read_tokens": 1200,
     "cache_write_tokens": 3100},
    {"input_tokens": 2890, "output_tokens": 37, "cache_read_tokens": 4300,
     "cache_write_tokens": 0},
]
MINI_USAGE = [
    {"input_tokens": 1777, "output_tokens": 333, "cache_read_tokens": 500},
    {"input_tokens": 2100, "output_tokens": 21, "cache_read_tokens": 900},
]


CODEX_USAGE = [
    {"input_tokens": 3100, "output_tokens": 210, "cache_read_tokens": 700},
    {"input_tokens": 3650, "output_tokens": 15, "cache_read_tokens": 2900},
]
OPENCODE_USAGE = [
    {"input_tokens": 4100, "output_tokens": 199, "cache_read_tokens": 1300},
    {"input_tokens": 4420, "output_tokens": 12, "cache_read_tokens": 4000},
]
#: Anthropic's API always sends its cache counts (0 when none): so do its scripted replies
OPENCODE_ANTHROPIC_USAGE = [{**u, "cache_write_tokens": 0} for u in OPENCODE_USAGE]
MINI_ANTHROPIC_USAGE = [{**u, "cache_write_tokens": 0} for u in MINI_USAGE]
FALLBACK = {"text": "unexpected request", "usage": {"input_tokens": 1, "output_tokens": 1}}


def _heredoc() -> str:
    return "cat > shop/inventory.py <<'EVALQ_EOF'\n" + inventory_solution() + "EVALQ_EOF\n"


def _codex_script():
    return parse_script({"turns": [
        {"match": {"tool": "exec_command"}, "text": "Writing the method.", "tool_calls": [
            {"name": "exec_command", "arguments": {"cmd": _heredoc()}}],
         "usage": CODEX_USAGE[0]},
        {"match": {"tool": "exec_command"}, "text": "Added remove(); done.",
         "usage": CODEX_USAGE[1]}], "fallback": FALLBACK})


def _opencode_script(skill: str | None = None, usage=OPENCODE_USAGE):
    load = [{"match": {"tool": "skill"}, "text": "Loading the skill.", "tool_calls": [
        {"name": "skill", "arguments": {"name": skill}}],
        "usage": {"input_tokens": 900, "output_tokens": 9, "cache_read_tokens": 100}}]
    return parse_script({"turns": (load if skill else []) + [
        {"match": {"tool": "bash"}, "text": "Writing the method.", "tool_calls": [
            {"name": "bash", "arguments": {"command": _heredoc(),
                                           "description": "write inventory.py"}}],
         "usage": usage[0]},
        {"match": {"tool": "bash"}, "text": "Added remove(); done.",
         "usage": usage[1]}], "fallback": FALLBACK})


def _silent(script):
    """The same conversation from a provider that reports no usage at all."""
    return replace(script, turns=tuple(replace(t, no_usage=True) for t in script.turns),
                   fallback=replace(script.fallback, no_usage=True))


def _claude_script():
    return parse_script({"turns": [
        {"match": {"tool": "Read"}, "text": "Reading the module first.",
         "tool_calls": [{"name": "Read", "arguments": {"file_path": "{cwd}/shop/inventory.py"}}],
         "usage": CLAUDE_USAGE[0]},
        {"match": {"tool": "Write"}, "text": "I will add Inventory.remove.",
         "tool_calls": [{"name": "Write", "arguments": {
             "file_path": "{cwd}/shop/inventory.py", "content": inventory_solution()}}],
         "usage": CLAUDE_USAGE[1]},
        {"match": {"tool": "Write"}, "text": "Added remove(); the task is done.",
         "usage": CLAUDE_USAGE[2]}],
        "fallback": {"text": "unexpected request", "usage": {"input_tokens": 1,
                                                             "output_tokens": 1}}})


def _mini_script(usage=MINI_USAGE):
    heredoc = _heredoc()
    return parse_script({"turns": [
        {"text": "Writing the method.", "tool_calls": [
            {"name": "bash", "arguments": {"command": heredoc}}], "usage": usage[0]},
        {"text": "Submitting.", "tool_calls": [
            {"name": "bash", "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}],
         "usage": usage[1]}],
        "fallback": {"text": "unexpected request", "usage": {"input_tokens": 1,
                                                             "output_tokens": 1}}})


def _wire(home, row) -> list[dict]:
    """The run's wire records, as stored."""
    return [json.loads(line) for line in artifact(home, row["artifacts"]["wire"]).splitlines()]


def _sum(usages, key):
    return sum(u[key] for u in usages)


AGENTS = {  # condition: (agent, model as its users write it, script, url suffix, provider API)
    "claude": ("claude-code", "claude-sonnet-4-5", _claude_script, "", "anthropic"),
    "codex": ("codex", "gpt-5-codex", _codex_script, "/v1", "openai"),
    "opencode": ("opencode", "openai/gpt-5", _opencode_script, "/v1", "openai"),
    "mini": ("mini-swe-agent", "openai/gpt-5", _mini_script, "/v1", "openai"),
}
#: the same agents with their other provider's ids, and opencode on a custom chat endpoint
VARIANTS = {
    "opencode-anthropic": ("opencode", "anthropic/claude-sonnet-4-5",
                           lambda: _opencode_script(usage=OPENCODE_ANTHROPIC_USAGE), "",
                           "anthropic"),
    "mini-anthropic": ("mini-swe-agent", "anthropic/claude-sonnet-4-5",
                       lambda: _mini_script(MINI_ANTHROPIC_USAGE), "", "anthropic"),
    "opencode-chat": ("opencode", "evalq/gpt-5", _opencode_script, "/v1", "openai"),
}
#: opencode once more with a skill installed, which its scripted model loads through its tool
OPENCODE_SKILL, SKILL = "opencode-skill", "tidy-code"
#: tool names each agent's scripted calls use (read back from its normalized trajectory)
TOOLS = {"claude": {"Read", "Write"}, "codex": {"command_execution"}, "opencode": {"bash"},
         "mini": {"bash"}}


def _spec(name: str):
    return VARIANTS.get(name) or AGENTS[_base(name)]


def _conditions(servers) -> str:
    text = ""
    for name, server in servers.items():
        agent, model, _, suffix, _ = _spec(name)
        skill = f'skill = "skills/{SKILL}"' if name == OPENCODE_SKILL else ""
        text += f'''
[[conditions]]
name = "{name}"
agent = "{agent}"
model = "{model}"
{skill}
settings = {{ base_url = "{server.url}{suffix}" }}
'''
    return text


ANTHROPIC_KEY, OPENAI_KEY = "sk-ant-test-not-a-real-key", "sk-test-not-a-real-key"


def _key_sent(headers: dict) -> str | None:
    """The provider key a request carried (x-api-key, or a bearer token)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    return lowered.get("x-api-key") or lowered.get("authorization", "").removeprefix("Bearer ")


def _base(name: str) -> str:
    return name.split("-", 1)[0]


def _provider(name: str, script) -> StrictProvider:
    api = _spec(name)[4]
    return StrictProvider(script, api, ANTHROPIC_KEY if api == "anthropic" else OPENAI_KEY)


@pytest.mark.parametrize("sandbox", ["bwrap", "docker"])
def test_four_real_agents_end_to_end(tmp_path, agent_path, sandbox):  # noqa: F811
    """Each agent sealed in the agent sandbox; its only way out the model gateway."""
    fixture = copy_fixture("py-inventory-feature", tmp_path / "fixtures")
    with ExitStack() as stack:
        servers = {}
        for name, (_, _, script, _, _) in AGENTS.items():
            servers[name] = stack.enter_context(_provider(name, script()))
            servers[f"{name}-silent"] = stack.enter_context(_provider(name, _silent(script())))
        for name, (_, _, script, _, _) in VARIANTS.items():
            servers[name] = stack.enter_context(_provider(name, script()))
        servers[OPENCODE_SKILL] = stack.enter_context(_provider(OPENCODE_SKILL,
                                                                _opencode_script(SKILL)))
        skill_dir = tmp_path / "study" / "skills" / SKILL
        skill_dir.mkdir(parents=True)
        (skill_dir / "SKILL.md").write_text(f"---\nname: {SKILL}\ndescription: Keep functions "
                                            "small.\n---\nKeep functions small.\n")
        manifest = write_manifest(tmp_path / "study", fixture, _conditions(servers))
        home = tmp_path / "home"
        report = run_study(manifest, home, {"EVALQ_AGENT_PATH": agent_path,
                                            "EVALQ_AGENT_SANDBOX": sandbox,
                                            "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
                                            "OPENAI_API_KEY": OPENAI_KEY})
        # the strict provider refused nothing: documented paths, its auth headers, good bodies
        assert {n: s.rejected for n, s in servers.items() if s.rejected} == {}
        finished = {n: s.finished for n, s in servers.items()}
        # every request went to the scripted turns, none to the fallback (nothing uncounted)
        stray = {n: [ex.path for ex in s.exchanges if ex.turn is None]
                 for n, s in servers.items()}
        reported = {n: s.reported() for n, s in servers.items()}
        per_request = {n: [ex.usage for ex in s.exchanges] for n, s in servers.items()}
        mini_sent = [ex.body.get("messages") or [] for ex in servers["mini"].exchanges]
        keys = {n: {_key_sent(ex.headers) for ex in s.exchanges} for n, s in servers.items()}

    rows = {r["trial_id"]: r for r in attempts(home)}
    by_condition = {t["condition"]: rows[t["trial_id"]] for t in report["trial_rows"]}
    trial_of = {t["condition"]: t["trial_id"] for t in report["trial_rows"]}
    # a provider that reports no usage has each call charged at its worst case (its output
    # cap, else the model's limit, at the price): against the fixture's $1 limit that may
    # stop the run, named in its stop reason; a stopped run is not graded correct
    stopped = {c for c, r in by_condition.items() if c.endswith("-silent")
               and r["outcome"] == "timed_out"}
    for name in stopped:
        reason = by_condition[name]["metrics"]["stop_reason"] or ""
        assert reason.startswith("model gateway: cost budget spent"), (name, reason)
    assert {c: r["outcome"] for c, r in by_condition.items() if c not in stopped} == \
        {c: "correct" for c in servers if c not in stopped}, \
        {c: r["reason"] for c, r in by_condition.items()}
    assert all(done for n, done in finished.items() if n not in stopped), finished
    # every request of a run that went on went to the scripted turns, none to the fallback
    # (nothing uncounted); a run without usage may behave otherwise before it is stopped
    assert not any(paths for n, paths in stray.items() if n not in stopped), stray

    # --- tokens equal the server's ledger, or are null where the wire carried none ---------
    expected_usage = {"claude": CLAUDE_USAGE, "codex": CODEX_USAGE, "opencode": OPENCODE_USAGE,
                      "opencode-anthropic": OPENCODE_ANTHROPIC_USAGE,
                      "opencode-chat": OPENCODE_USAGE, "mini": MINI_USAGE,
                      "mini-anthropic": MINI_ANTHROPIC_USAGE}
    # each reached the documented endpoint of its provider's API
    apis = {n: {ex.api for ex in s.exchanges} for n, s in servers.items()}
    assert apis["codex"] == apis["opencode"] == {"responses"}, apis
    assert apis["claude"] == apis["opencode-anthropic"] == apis["mini-anthropic"] == \
        {"anthropic"}, apis
    assert apis["mini"] == apis["opencode-chat"] == {"openai"}, apis
    for name, usages in expected_usage.items():
        metrics = by_condition[name]["metrics"]
        assert {k: v for k, v in reported[name].items() if v is not None} == \
            {k: _sum(usages, k) for k in usages[0]}
        for key, value in reported[name].items():
            if key != "cache_write_tokens" or name == "claude":
                assert metrics[key] == value, (name, key)
        if name != "claude":  # these agents print no cache writes, or 0: null, not the 0
            assert metrics["cache_write_tokens"] is None and \
                metrics["unreported"]["cache_write_tokens"]
        row = next(t for t in report["trial_rows"] if t["condition"] == name)
        # the report counts the wire, whose counts are the provider's, all of them
        assert row["usage_source"] == "gateway" and row["accounting_complete"] is True, name
        assert metrics["wire_cost_usd"] is not None, name
        assert report["cost"][name]["per_success"] == metrics["wire_cost_usd"], name
        if _spec(name)[4] == "openai" or name == "claude":  # the agent's own, priced alike
            assert metrics["cost_source"] == "price_table", name
            assert metrics["cost_usd"] == pytest.approx(metrics["wire_cost_usd"], abs=1e-9)

    for name in AGENTS:
        silent = f"{name}-silent"
        metrics = by_condition[silent]["metrics"]
        charged = [r for r in _wire(home, by_condition[silent]) if r["status"] == 200]
        assert charged and all(r["charged"].startswith("at its worst case") for r in charged)
        assert set(reported[silent].values()) == {None}  # the server reported nothing
        for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            assert metrics[key] is None, (silent, key, metrics[key])
            if silent not in stopped:  # (a stopped one's reason is its stop reason, above)
                assert metrics["unreported"][key], (silent, key)  # with the reason
        assert metrics["cost_usd"] is None and metrics["cost_source"] is None, silent
        assert metrics["request_prompt_tokens"] is None, silent
        row = next(t for t in report["trial_rows"] if t["condition"] == silent)
        assert row["accounting_complete"] is False and row["cost_usd"] is None, silent
        assert report["cost"][silent]["per_success"] is None, silent
        assert report["cost"][silent]["per_success_reason"], silent
        assert report["conditions"][silent]["tokens"]["input_tokens"]["total"] is None
    markdown = next((home / "reports").glob("*/report.md")).read_text()
    for name in AGENTS:
        if f"{name}-silent" in stopped:
            continue
        line = next(l for l in markdown.splitlines()  # the cost table's row: "1 of 1" incomplete
                    if l.startswith(f"| {name}-silent | ") and " 1 of 1 " in l)
        assert "unavailable" in line.split("|")[3], line  # the cost-per-success cell

    # --- the Claude and mini specifics kept from before ------------------------------------
    claude = by_condition["claude"]["metrics"]
    assert claude["request_prompt_tokens"] == [sum(u.values()) - u["output_tokens"]
                                               for u in CLAUDE_USAGE]
    assert claude["tool_calls"] == 2 and claude["tool_failures"] == 0 and claude["turns"] == 3
    table = load_price_table()
    p = table.models["claude-sonnet-4-5"]
    expected = (_sum(CLAUDE_USAGE, "input_tokens") * p["input"] +
                _sum(CLAUDE_USAGE, "output_tokens") * p["output"] +
                _sum(CLAUDE_USAGE, "cache_read_tokens") * p["cache_read"] +
                _sum(CLAUDE_USAGE, "cache_write_tokens") * p["cache_write"]) / 1e6
    assert abs(claude["cost_usd"] - expected) < 1e-9
    assert claude["reported_cost_usd"] is not None  # the agent's own figure is kept beside it
    assert claude["price_table_id"] == table.id and claude["price_table_date"] == table.date
    assert "cache reads $0.3/Mtok" in claude["cache_pricing"]
    mini = by_condition["mini"]["metrics"]
    assert mini["request_prompt_tokens"] == [u["input_tokens"] + u["cache_read_tokens"]
                                             for u in MINI_USAGE]
    assert mini["tool_calls"] == 2
    assert mini["estimated_context_tokens"] == [
        math.ceil(sum(message_chars(m) for m in sent) / CHARS_PER_TOKEN) for sent in mini_sent]
    assert mini["estimated_context_tokens"] != mini["request_prompt_tokens"]
    assert claude["estimated_context_tokens"] is None  # its stream lacks the system prompt
    opencode = by_condition["opencode"]["metrics"]
    assert opencode["request_prompt_tokens"] == [u["input_tokens"] + u["cache_read_tokens"]
                                                 for u in OPENCODE_USAGE]
    assert opencode["tool_calls"] == 1 and opencode["turns"] == 2
    codex = by_condition["codex"]["metrics"]
    assert codex["request_prompt_tokens"] is None  # codex reports per turn only
    assert codex["tool_calls"] == 1 and codex["tool_failures"] == 0
    mini_row = next(t for t in report["trial_rows"] if t["condition"] == "mini")
    assert mini_row["estimated_context_tokens_per_request"] == mini["estimated_context_tokens"]
    shown = ", ".join(f"{v:,}" for v in mini["estimated_context_tokens"])
    assert "| estimated context tokens per request |" in markdown and shown in markdown

    # --- versions: never unknown for an installed agent --------------------------------------
    env_agents = by_condition["claude"]["worker_env"]["agents"]
    for agent, _, _, _, _ in AGENTS.values():
        assert env_agents[agent], (agent, env_agents)
    assert env_agents["mini-swe-agent"] == "2.4.6"  # from its package metadata

    # --- one normalized trajectory per run, and a transcript page linked from the report ----
    report_dir = next((home / "reports").glob("*/report.html")).parent
    html = (report_dir / "report.html").read_text()
    for name, row in by_condition.items():
        if name in stopped:  # stopped early: its trajectory may hold no tool call yet
            continue
        doc = json.loads(artifact(home, row["artifacts"]["transcript"]))
        base = _base(name)
        assert doc["schema_version"].startswith("ATIF-") and doc["agent"]["version"], name
        assert doc["agent"]["name"] == AGENTS[base][0]
        task = next(s for s in doc["steps"] if s["source"] == "user")
        assert "remove" in task["message"], name  # the task prompt
        calls = {c["function_name"] for s in doc["steps"] for c in s.get("tool_calls") or []}
        assert TOOLS[base] <= calls, (name, calls)
        results = [r for s in doc["steps"] for r in (s.get("observation") or {}).get("results")
                   or []]
        assert results and not any(r["is_error"] for r in results), name
        step_usage = [s["metrics"] for s in doc["steps"] if "metrics" in s]
        if doc["extra"]["usage_scope"] == "request" and not name.endswith("-silent"):
            assert len(step_usage) == len(per_request[name]), name
            for step, wire in zip(step_usage, per_request[name]):  # what is shown is exact
                assert step["input_tokens"] == wire["input_tokens"], name
                assert all(wire[k] == v for k, v in step.items() if v is not None), name
        if base in ("opencode", "mini"):  # their output carries timestamps
            assert all(s["timestamp"].endswith("Z") for s in doc["steps"]
                       if s["source"] == "agent"), name
        link = page_name(trial_of[name])
        assert link.startswith("transcripts/") and f'href="{link}"' in html, name
        page = (report_dir / link).read_text()
        assert escape("def remove") in page and "Content-Security-Policy" in page, name

    # --- skill activation: from the trajectory where the agent can load skills --------------
    for name in ("claude", "opencode"):
        assert by_condition[name]["metrics"]["skill_loaded"] is False  # no skill tool called
    assert by_condition[OPENCODE_SKILL]["metrics"]["skill_loaded"] is True
    assert report["conditions"][OPENCODE_SKILL]["skill_activation"]["loaded"] == 1
    assert SKILL in json.dumps(servers[OPENCODE_SKILL].exchanges[0].body)  # opencode listed it
    for name in ("codex", "mini"):
        metrics = by_condition[name]["metrics"]
        assert metrics["skill_loaded"] is None and metrics["unreported"]["skill_loaded"]
    assert json.dumps(report)  # the report is plain JSON
    assert report["agent_sandbox"]["sealed"] is True
    assert report["agent_sandbox"]["backends"] == {sandbox: len(servers)}

    # --- the model gateway: its wire counts equal the server's, and only it held the key ----
    for name in servers:
        metrics = by_condition[name]["metrics"]
        assert metrics["wire_requests"] == len(per_request[name]), name
        for key, value in reported[name].items():
            assert metrics[f"wire_{key}"] == value, (name, key)
        assert metrics["wire_provider_errors"] == 0, name
        # nothing refused, but calls a stopped run made past its spent budget
        refused = [r for r in _wire(home, by_condition[name]) if r["refused"]]
        assert metrics["wire_refused"] == len(refused), name
        assert all(r["status"] == 429 for r in refused) if name in stopped else not refused, \
            (name, refused)
        if not name.endswith("-silent"):
            assert metrics["accounting_disagrees"] == [], (name, metrics["accounting_disagrees"])
        real = ANTHROPIC_KEY if _spec(name)[4] == "anthropic" else OPENAI_KEY
        assert keys[name] == {real}, (name, keys[name])  # the provider saw the worker's key
        assert by_condition[name]["artifacts"].get("wire"), name
    for path in home.rglob("*"):  # database, artifact store, logs, reports, run folders
        if path.is_file():
            data = path.read_bytes()
            if data[:2] == b"\x1f\x8b":  # a stored workspace (gzip'd tar)
                data = gzip.decompress(data)
            for key in (ANTHROPIC_KEY, OPENAI_KEY):
                assert key.encode() not in data, f"a credential reached {path}"
