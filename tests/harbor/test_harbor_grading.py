"""Harbor tasks graded in both sandboxes: the oracle passes, the untouched workspace (nop)
fails, partial credit is kept as the reward criterion, a workspace that shadows the
verifier's toolchain is `incorrect` with tampered, and a changed environment is refused."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from hostile.hostile_backend import backend  # noqa: F401 (the fixture: both sandboxes)
from harbor_tasks import (multistage_task, node_task, partial_task, prebuilt_task, python_task,
                          shell_task, unique)
from evalq.fixtures.fixture import load_fixture
from evalq.fixtures.harbor.environment import remove_environment
from evalq.fixtures.harbor.importer import import_task
from evalq.fixtures.selfcheck import check_fixture
from evalq.graders.grade import grade_workspace, prepare_reference
from evalq.models import Outcome


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("harbor")
    base = f"evalq-harbor-test-{unique('base')}:local"  # a local image for docker_image
    context = root / "base"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM evalq-grader-python:local\nUSER 0:0\n"
                                        "WORKDIR /app\n")
    subprocess.run(["docker", "build", "-q", "--network", "none", "-t", base, str(context)],
                   check=True, capture_output=True, env={"DOCKER_BUILDKIT": "0",
                                                         "PATH": "/usr/bin:/bin"})
    tasks = {"python": python_task(root), "shell": shell_task(root),
             "partial": partial_task(root), "node": node_task(root),
             "multistage": multistage_task(root), "prebuilt": prebuilt_task(root, base)}
    try:
        yield {kind: load_fixture(import_task(task, root / "fixtures").path)
               for kind, task in tasks.items()}
    finally:
        for task in tasks.values():
            remove_environment(task.name)
        subprocess.run(["docker", "image", "rm", "-f", base], capture_output=True)


@pytest.mark.parametrize("kind", ["python", "shell", "partial", "node", "multistage",
                                  "prebuilt"])
def test_oracle_passes_and_nop_fails(imported, backend, kind):
    check = check_fixture(imported[kind], sandbox=backend)
    assert check.verdicts == {"initial": "incorrect", "correct": "correct",
                              "incorrect": "incorrect"}, check.failures
    correct = check.results["correct"]
    assert correct.verdict == "harbor" and correct.tampered is False
    assert correct.toolchain["rootfs_digest"].startswith("sha256:")
    assert [c.name for c in correct.criteria] == ["reward"] and correct.criteria[0].passed


def _graded(fixture, backend, files: dict[str, str]):
    with tempfile.TemporaryDirectory() as tmp:
        workspace = prepare_reference(fixture, "correct", Path(tmp) / "ws")
        for rel, text in files.items():
            (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
            (workspace / rel).write_text(text)
        return grade_workspace(fixture, workspace, sandbox=backend)


def test_partial_reward_is_kept_per_run(imported, backend):
    result = _graded(imported["partial"], backend, {"words.txt": "alpha\nbeta\n"})
    assert result.outcome == Outcome.incorrect
    assert result.criteria[0].name == "reward" and result.criteria[0].passed is False
    assert "reward 0.666667" in result.criteria[0].evidence
    assert "under the threshold 1" in result.reason


@pytest.mark.parametrize("shadow", [
    {"sitecustomize.py": "import os\nos._exit(0)\n"},
    {"conftest.py": "def pytest_collection_modifyitems(items):\n    items.clear()\n"},
    {"pytest.py": "raise SystemExit(0)\n"},
    {"lib/python3": "#!/bin/sh\nexit 0\n"},
    {"vendor/_pytest/__init__.py": ""},
    {"json.py": "raise SystemExit(0)\n"},
])
def test_shadowing_the_verifiers_toolchain_is_tampering(imported, backend, shadow):
    result = _graded(imported["python"], backend, shadow)
    assert result.outcome == Outcome.incorrect and result.tampered is True
    assert result.reason.startswith("tampered:") and next(iter(shadow)) in result.reason


def test_an_environment_other_than_the_pinned_one_is_not_graded(imported, backend, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(imported["python"].path, copy)
    settings = copy / "harbor.toml"
    text = settings.read_text()
    pinned = text.split('rootfs_digest = "')[1].split('"')[0]
    settings.write_text(text.replace(pinned, "sha256:" + "0" * 64))
    fixture = load_fixture(copy, verify=False)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = prepare_reference(fixture, "correct", Path(tmp) / "ws")
        result = grade_workspace(fixture, workspace, sandbox=backend)
    assert result.outcome == Outcome.grading_failure
    assert "not the pinned sha256:0000" in result.reason and pinned in result.reason


def test_a_task_whose_environment_is_not_here_says_how_to_get_it(imported, backend, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(imported["python"].path, copy)
    spec = copy / "fixture.toml"
    spec.write_text(spec.read_text().replace(imported["python"].spec.image,
                                             "evalq-grader-harbor-not-built-here:local"))
    fixture = load_fixture(copy, verify=False)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = prepare_reference(fixture, "correct", Path(tmp) / "ws")
        result = grade_workspace(fixture, workspace, sandbox=backend)
    assert result.outcome == Outcome.grading_failure
    assert "not on this machine" in result.reason and "evalq fixtures environment" in result.reason


@pytest.mark.parametrize("code, limit", [
    ("while True:\n    pass\n", "time"),
    ("hog = [bytearray(10**7) for _ in range(1000)]\n", "memory"),
])
def test_agent_code_that_runs_the_verifier_into_a_limit_is_incorrect(imported, backend,
                                                                     tmp_path, code, limit):
    """Not a grading_failure: that would take the run out of the rates at the agent's hands.
    A hang holds the verifier to its time limit; a memory hog is killed by the memory limit
    (the verifier then either stops there or, its test run killed, writes reward 0)."""
    copy = tmp_path / "copy"
    shutil.copytree(imported["python"].path, copy)
    spec = copy / "fixture.toml"
    spec.write_text(spec.read_text().replace("timeout_seconds = 60.0", "timeout_seconds = 8"))
    fixture = load_fixture(copy, verify=False)
    assert fixture.spec.grade.timeout_seconds == 8
    with tempfile.TemporaryDirectory() as tmp:
        workspace = prepare_reference(fixture, "correct", Path(tmp) / "ws")
        (workspace / "calc.py").write_text(code)
        result = grade_workspace(fixture, workspace, sandbox=backend)
    assert result.outcome == Outcome.incorrect and result.tampered is False
    # the hog's process may be the one killed, and then the verifier goes on to reward 0
    alternatives = [f"hit its {limit} limit"] + (["reward 0 is under"] if limit == "memory" else [])
    assert any(text in result.reason for text in alternatives), result.reason
