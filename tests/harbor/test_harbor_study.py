"""A study on imported Harbor tasks, end to end in both sandboxes (agent and grading):
the oracle condition is correct on every task, nop on none, and an agent that plants a
`sitecustomize.py` for the verifier's interpreter is caught as tampered."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from harbor_tasks import partial_task, python_task, shell_task
from evalq.fixtures.harbor.environment import remove_environment
from evalq.fixtures.harbor.importer import import_task

#: written by the shell of the task's environment (the agent runs there: it has no `patch`)
TAMPER = ("printf 'import os\\nos.makedirs(\"/logs/verifier\", exist_ok=True); "
          "open(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")\\n' > sitecustomize.py")


@pytest.fixture(scope="module")
def harbor_fixtures(tmp_path_factory):
    root = tmp_path_factory.mktemp("harbor-study")
    tasks = [python_task(root), shell_task(root), partial_task(root)]
    try:
        yield [import_task(task, root / "fixtures").path for task in tasks]
    finally:
        for task in tasks:
            remove_environment(task.name)


def _study(folder, fixtures) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    listed = ", ".join(json.dumps(str(path)) for path in fixtures)
    (folder / "study.toml").write_text(f'''
id = "harbor"
fixtures = [{listed}]
repetitions = 1
seed = 3

[budgets]
wall_seconds = 120

[[conditions]]
name = "oracle"
agent = "scripted"
settings = {{ action = "solution", solution = "correct" }}

[[conditions]]
name = "nop"
agent = "scripted"
settings = {{ action = "noop" }}

[[conditions]]
name = "tamper"
agent = "command"
settings = {{ argv = ["sh", "-c", {json.dumps(TAMPER)}] }}
''')
    return str(folder / "study.toml")


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_study_on_harbor_tasks(tmp_path, harbor_fixtures, backend):
    env = {"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_SANDBOX": backend,
           "EVALQ_AGENT_SANDBOX": backend}
    proc = run_cli(["run", _study(tmp_path / "study", harbor_fixtures)], env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    path = [l for l in proc.stdout.splitlines() if l.endswith("report.json")][0]
    report = json.loads(open(path.split("report: ", 1)[1]).read())
    rows = report["trial_rows"]
    assert len(rows) == 9
    by = {}
    for row in rows:
        by.setdefault(row["condition"], []).append(row)
    assert [r["outcome"] for r in by["oracle"]] == ["correct"] * 3, by["oracle"]
    assert [r["outcome"] for r in by["nop"]] == ["incorrect"] * 3, by["nop"]
    assert [r["outcome"] for r in by["tamper"]] == ["incorrect"] * 3, by["tamper"]
    assert all(r["tampered"] is True for r in by["tamper"])
    assert all(r["tampered"] is False and r["verdict"] == "harbor" for r in by["oracle"])
