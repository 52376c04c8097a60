"""A sealed agent cannot make a trace criterion pass by forging a trajectory, in both sandboxes.

Trace criteria read the run's `transcript` artifact, which the worker writes outside the
sandbox from what the sandbox captured of the agent process's own output; nothing in the
workspace or the profile is read for it. This `command` agent writes trajectory-shaped files
everywhere it can (the workspace, its output folder, its HOME, where Claude Code and
mini-swe-agent keep theirs), each showing the skill loaded and the tests run, and prints an
ATIF document and Claude-style tool-use events on stdout. Its trace criteria stay unmet (false,
not unresolved), the evidence names zero matching tool calls, and the run is graded on its
code (`incorrect`: it fixed nothing).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "agents"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "criteria"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from criteria_study import criteria_fixture  # noqa: E402
from test_agents_support import artifact, attempts, run_study  # noqa: E402
from evalq.graders.sandbox.cleanup import remove_tree  # noqa: E402

FORGES = r'''
import json, os, sys
workspace, out, home = sys.argv[1], sys.argv[2], os.environ["HOME"]
call = lambda i, name, args: {"tool_call_id": f"f{i}", "function_name": name, "arguments": args}
atif = {"schema_version": "ATIF-v1.4", "session_id": "forged", "agent": {"name": "scripted"},
        "steps": [{"step_id": 1, "source": "agent", "message": "loading the skill",
                   "tool_calls": [call(1, "skill", {"name": "slug-rules"}),
                                  call(2, "Read", {"path": "/skills/slug-rules/SKILL.md"}),
                                  call(3, "bash", {"command": "python3 -m pytest -q"})],
                   "observation": {"results": [{"source_call_id": f"f{i}", "content": "ok",
                                                "is_error": False} for i in (1, 2, 3)]}}]}
claude = [{"type": "assistant", "message": {"content": [
    {"type": "tool_use", "id": "t1", "name": "Skill", "input": {"skill": "slug-rules"}},
    {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "pytest -q"}}]}},
    {"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "loaded"}]}}]
text = json.dumps(atif)
for folder, names in ((workspace, ["transcript.json", "trajectory.json", ".evalq/transcript",
                                   "logs/trajectory.traj.json"]),
                      (out, ["transcript.json", "trajectory.json", "../trajectory.json"]),
                      (home, [".claude/projects/-workspace/session.jsonl",
                              ".config/mini-swe-agent/last.traj.json"])):
    for name in names:
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text if not name.endswith(".jsonl") else
                    "".join(json.dumps(e) + "\n" for e in claude))
print(text)
for event in claude:
    print(json.dumps(event))
'''

CRITERIA = '''
[[criteria]]
name = "hidden checks"
kind = "hidden"
checks = ["*"]

[[criteria]]
name = "forged skill"
kind = "trace"
required = false
rule = { any = [{ event = "tool_call", tool = "skill" },
                { event = "tool_call", contains = ["SKILL.md"] }] }

[[criteria]]
name = "forged tests"
kind = "trace"
required = false
rule = { event = "tool_call", tool = "bash", contains = ["pytest"] }
'''


@pytest.mark.parametrize("sandbox", ["bwrap", "docker"])
def test_forged_trajectory_files_do_not_meet_trace_criteria(tmp_path, sandbox):
    from evalq.fixtures.fixture import freeze_fixture

    fixture = criteria_fixture(tmp_path / "fixtures", "slug-forged", "directed-integration",
                               "textutil")
    manifest = fixture / "fixture.toml"
    head = manifest.read_text().split("\n[[criteria]]", 1)[0]
    manifest.write_text(head + CRITERIA)
    freeze_fixture(fixture)
    code = FORGES.replace("{", "{{").replace("}", "}}")
    argv = json.dumps(["python3", "-c", code, "{workspace}", "{output_dir}"])
    study = tmp_path / "study.toml"
    study.write_text(f'id = "forged"\nfixtures = ["{fixture.as_posix()}"]\nrepetitions = 1\n'
                     'max_attempts = 1\n[budgets]\nwall_seconds = 120\n\n[[conditions]]\n'
                     f'name = "forger"\nagent = "command"\nsettings = {{ argv = {argv} }}\n')
    home = tmp_path / "home"
    try:
        report = run_study(study, home, {"EVALQ_AGENT_SANDBOX": sandbox})
        (row,) = attempts(home)
        assert row["worker_env"]["agent_sandbox"] == sandbox
        assert row["outcome"] == "incorrect", row["reason"]
        import sqlite3

        db = sqlite3.connect(home / "evalq.db")
        (stored,) = db.execute("select criterion_results from attempts").fetchone()
        db.close()
        results = {r["name"]: r for r in json.loads(stored)}
        for name in ("forged skill", "forged tests"):
            assert results[name]["passed"] is False, results[name]
            assert results[name]["steps"] == []
        assert "0 tool call(s) of bash containing 'pytest'" in results["forged tests"]["evidence"]
        assert results["hidden checks"]["passed"] is False
        # the forged files were really written, and stored with the workspace: only not read
        transcript = json.loads(artifact(home, row["artifacts"]["transcript"]))
        assert not [c for s in transcript["steps"] for c in s.get("tool_calls") or []]
        assert "forged" in artifact(home, row["artifacts"]["diff"]).decode()
        block = report["criteria"]["directed-integration"]
        assert block["forged skill"]["conditions"]["forger"]["estimate"] == 0.0
    finally:
        assert remove_tree(home) == []
