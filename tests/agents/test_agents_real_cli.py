"""Real agent CLIs from their registries (Claude Code from npm, mini-swe-agent from PyPI) run a
fixture end to end against the scripted model server on loopback: the agent edits the workspace
with its own tools, the run is graded, and the server's usage arrives in the DB and report."""

from __future__ import annotations

import gzip
import json
import math

import pytest


from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.pricing import load_price_table
from evalq.workers.agents.context_estimate import CHARS_PER_TOKEN, message_chars
from test_agents_support import (agent_path, attempts, copy_fixture,  # noqa: F401
                                 inventory_solution, run_study, write_manifest)

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


def _mini_script():
    heredoc = "cat > shop/inventory.py <<'EVALQ_EOF'\n" + inventory_solution() + "EVALQ_EOF\n"
    return parse_script({"turns": [
        {"text": "Writing the method.", "tool_calls": [
            {"name": "bash", "arguments": {"command": heredoc}}], "usage": MINI_USAGE[0]},
        {"text": "Submitting.", "tool_calls": [
            {"name": "bash", "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}],
         "usage": MINI_USAGE[1]}],
        "fallback": {"text": "unexpected request", "usage": {"input_tokens": 1,
                                                             "output_tokens": 1}}})


def _sum(usages, key):
    return sum(u[key] for u in usages)


@pytest.mark.parametrize("sandbox", ["bwrap", "docker"])
def test_claude_code_and_mini_swe_agent_end_to_end(tmp_path, agent_path, sandbox):  # noqa: F811
    """Both agents sealed in the agent sandbox, their model traffic through its door."""
    fixture = copy_fixture("py-inventory-feature", tmp_path / "fixtures")
    with ModelServer(_claude_script()) as claude_srv, ModelServer(_mini_script()) as mini_srv:
        conditions = f'''
[[conditions]]
name = "claude"
agent = "claude-code"
model = "claude-sonnet-4-5"
settings = {{ base_url = "{claude_srv.url}" }}

[[conditions]]
name = "mini"
agent = "mini-swe-agent"
model = "openai/gpt-5"
settings = {{ base_url = "{mini_srv.url}/v1" }}
'''
        manifest = write_manifest(tmp_path / "study", fixture, conditions)
        home = tmp_path / "home"
        report = run_study(manifest, home, {"EVALQ_AGENT_PATH": agent_path,
                                            "EVALQ_AGENT_SANDBOX": sandbox,
                                            "ANTHROPIC_API_KEY": "sk-ant-test-not-a-real-key",
                                            "OPENAI_API_KEY": "sk-test-not-a-real-key"})
        assert claude_srv.finished and mini_srv.finished
        # every request went to the scripted turns, none to the fallback
        assert all(ex.turn is not None for ex in claude_srv.exchanges + mini_srv.exchanges)
        claude_reported, mini_reported = claude_srv.reported(), mini_srv.reported()
        claude_keys = {ex.headers.get("x-api-key") or ex.headers.get("X-Api-Key")
                       for ex in claude_srv.exchanges}
        mini_keys = {(ex.headers.get("Authorization") or ex.headers.get("authorization") or "")
                     for ex in mini_srv.exchanges}
        mini_sent = [ex.body.get("messages") or [] for ex in mini_srv.exchanges]

    rows = {r["trial_id"]: r for r in attempts(home)}
    by_condition = {t["condition"]: rows[t["trial_id"]] for t in report["trial_rows"]}
    assert {c: r["outcome"] for c, r in by_condition.items()} == \
        {"claude": "correct", "mini": "correct"}, {c: r["reason"] for c, r in by_condition.items()}

    claude = by_condition["claude"]["metrics"]
    assert claude_reported == {k: _sum(CLAUDE_USAGE, k) for k in CLAUDE_USAGE[0]}
    for key, value in claude_reported.items():
        assert claude[key] == value, key
    assert claude["request_prompt_tokens"] == [sum(u.values()) - u["output_tokens"]
                                               for u in CLAUDE_USAGE]
    assert claude["tool_calls"] == 2 and claude["tool_failures"] == 0 and claude["turns"] == 3
    table = load_price_table()
    p = table.models["claude-sonnet-4-5"]
    expected = (_sum(CLAUDE_USAGE, "input_tokens") * p["input"] +
                _sum(CLAUDE_USAGE, "output_tokens") * p["output"] +
                _sum(CLAUDE_USAGE, "cache_read_tokens") * p["cache_read"] +
                _sum(CLAUDE_USAGE, "cache_write_tokens") * p["cache_write"]) / 1e6
    assert abs(claude["cost_usd"] - expected) < 1e-9 and claude["cost_source"] == "price_table"
    assert claude["reported_cost_usd"] is not None  # the agent's own figure is kept beside it
    assert claude["price_table_id"] == table.id and claude["price_table_date"] == table.date
    assert "cache reads $0.3/Mtok" in claude["cache_pricing"]

    mini = by_condition["mini"]["metrics"]
    assert mini_reported["cache_write_tokens"] is None
    for key in ("input_tokens", "output_tokens", "cache_read_tokens"):
        assert mini[key] == _sum(MINI_USAGE, key) == mini_reported[key], key
    assert mini["cache_write_tokens"] is None  # OpenAI-style usage has no cache writes
    assert mini["request_prompt_tokens"] == [u["input_tokens"] + u["cache_read_tokens"]
                                             for u in MINI_USAGE]
    assert mini["tool_calls"] == 2 and mini["cost_source"] == "price_table"
    # the estimate comes from the trajectory's messages; the server saw what was really sent
    assert mini["estimated_context_tokens"] == [
        math.ceil(sum(message_chars(m) for m in sent) / CHARS_PER_TOKEN) for sent in mini_sent]
    assert mini["estimated_context_tokens"] != mini["request_prompt_tokens"]
    assert claude["estimated_context_tokens"] is None  # its stream lacks the system prompt
    mini_row = next(t for t in report["trial_rows"] if t["condition"] == "mini")
    assert mini_row["estimated_context_tokens_per_request"] == mini["estimated_context_tokens"]
    assert mini_row["reported_prompt_tokens_per_request"] == mini["request_prompt_tokens"]
    markdown = next((home / "reports").glob("*/report.md")).read_text()
    shown = ", ".join(f"{v:,}" for v in mini["estimated_context_tokens"])
    assert "| estimated context tokens per request |" in markdown and shown in markdown

    for name, reported in (("claude", claude_reported), ("mini", mini_reported)):
        tokens = report["conditions"][name]["tokens"]
        assert tokens["input_tokens"]["total"] == reported["input_tokens"]
        assert tokens["output_tokens"]["total"] == reported["output_tokens"]
        row = next(t for t in report["trial_rows"] if t["condition"] == name)
        assert row["input_tokens"] == reported["input_tokens"]
        assert row["accounting_complete"] is True
    transcript_refs = {c: r["artifacts"].get("transcript") for c, r in by_condition.items()}
    assert all(transcript_refs.values())
    assert json.dumps(report)  # the report is plain JSON
    assert report["agent_sandbox"]["sealed"] is True
    assert report["agent_sandbox"]["backends"] == {sandbox: 2}

    # the model gateway: what it metered on the wire equals the server's usage exactly, and
    # only it held the credential (the agents had the placeholder)
    for metrics, reported in ((claude, claude_reported), (mini, mini_reported)):
        for key, value in reported.items():
            assert metrics[f"wire_{key}"] == value, key
        assert metrics["accounting_disagrees"] == []
        assert metrics["wire_refused"] == 0 and metrics["wire_provider_errors"] == 0
    assert claude["wire_requests"] == len(CLAUDE_USAGE)
    assert mini["wire_requests"] == len(MINI_USAGE)
    assert claude_keys == {"sk-ant-test-not-a-real-key"}
    assert mini_keys == {"Bearer sk-test-not-a-real-key"}
    assert all(by_condition[c]["artifacts"].get("wire") for c in by_condition)
    for path in home.rglob("*"):  # database, artifact store, logs, reports, run folders
        if path.is_file():
            data = path.read_bytes()
            if data[:2] == b"\x1f\x8b":  # a stored workspace (gzip'd tar)
                data = gzip.decompress(data)
            for key in (b"sk-ant-test-not-a-real-key", b"sk-test-not-a-real-key"):
                assert key not in data, f"a credential reached {path}"
