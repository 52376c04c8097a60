"""A wrong subject must be graded `incorrect`, never turned into a grading_failure.

A grading_failure is counted apart and never as incorrect, so agent code that can make its
judge exceed a limit hides a failed task from the success rate. Judged apart, what the judge
does depends on the subject's answers only through the values it receives and how long they
take; each attack below aims one of those at one of the judge's limits: its time (slow answers,
answers nobody asked for, a build that never ends), its output and report size (a huge
exception message, a huge wrong string), its memory (JSON that expands twenty-fold) and its
report's disk (the workspace, on the same disk, filled up). Every one is `incorrect`.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hostile_backend import backend, traversable_tempdir  # noqa: F401 (the fixture)

from conftest import copy_fixture
from evalq.fixtures.fixture import freeze_fixture, load_fixture
from evalq.graders.grade import grade_workspace
from evalq.models import Outcome
from test_hostile_solutions import leftovers
from test_judge_split import JUDGED, make_fixture

STRING_CHECK = JUDGED + """

def test_name():
    assert load_subject("app").name() == "forty-two"
"""
#: the agent's code reaches the subject server's channel and writes raw lines to it
RAW_CHANNEL = """
import gc

def channel():
    return next(o for o in gc.get_objects() if type(o).__name__ == "Server").channel
"""
ATTACKS = {
    "raises a 3 MB message": "def answer():\n    raise ValueError('x' * 3_000_000)\n",
    "returns a 3 MB wrong string": "def answer():\n    return 41\n\n"
                                   "def name():\n    return 'y' * 3_000_000\n",
    "answers slowly": "import time\n\ndef answer():\n    time.sleep(10)\n    return 41\n",
    "floods the channel": RAW_CHANNEL + """
def answer():
    out = channel()
    while True:
        out.write(b'{"id": -1, "ok": 0}\\n' * 10000)
        out.flush()
""",
    "answer that expands in memory": RAW_CHANNEL + """
def answer():
    body = b"[" + b",".join([b"[]"] * 2_000_000) + b"]"
    out = channel()
    for n in range(1, 40):
        out.write(b'{"id": %d, "ok": ' % n + body + b"}\\n")
        out.flush()
    return 41
""",
}


def fast(root: Path, tests: str | None = None, timeout: int = 20, memory_mb: int = 256):
    """The forgery fixture (answer() must be 42). Its time limit (a third of the shipped
    fixtures') gives the subject 14 s for answers and the judge 6 s of its own: on a loaded
    machine a slower start-up of the judge must not be what an attack on the time limit
    measures (a judge too slow to start is evalq's failure, whatever the subject does)."""
    make_fixture(root, "judge", tests)
    spec = root / "fixture.toml"
    spec.write_text(spec.read_text().replace("timeout_seconds = 20", f"timeout_seconds = {timeout}")
                    .replace("memory_mb = 256", f"memory_mb = {memory_mb}"))
    freeze_fixture(root)
    return load_fixture(root)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    root = tmp_path_factory.mktemp("subject-limits")
    return {"fast": fast(root / "fast", STRING_CHECK),
            "roomy": fast(root / "roomy", memory_mb=512)}


@pytest.fixture(autouse=True)
def grading_tmp(tmp_path, monkeypatch):  # tmp_path first: its base dir is made before the patch
    with traversable_tempdir("evalq-subject-", monkeypatch) as folder:
        yield folder


def graded(fixture, backend, tmp_path, files: dict[str, str]):
    workspace = tmp_path / "agent-workspace"
    for rel, text in files.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    return grade_workspace(fixture, workspace, sandbox=backend)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_subject_cannot_push_its_judge_past_a_limit(fixtures, backend, tmp_path, attack):
    result = graded(fixtures["fast"], backend, tmp_path, {"app.py": ATTACKS[attack]})
    assert result.outcome == Outcome.incorrect and result.tampered is False, result
    assert "test_answer" in result.reason, result.reason
    assert len(result.output_tail) < 10_000


def test_hung_build_in_a_make_fixture_is_incorrect(backend, tmp_path):
    """The toolchain route to the same end: a Makefile whose build never ends. The hidden
    conftest's build() waits up to 60 s, past this copy's 20 s time limit."""
    path = copy_fixture("c-vsort-bugfix", tmp_path / "fixtures")
    spec = path / "fixture.toml"
    spec.write_text(re.sub(r"timeout_seconds = \d+", "timeout_seconds = 20", spec.read_text()))
    freeze_fixture(path)
    fixture = load_fixture(path)
    workspace = tmp_path / "agent-workspace"
    shutil.copytree(fixture.workspace_dir, workspace)
    (workspace / "Makefile").write_text("all:\n\tsleep 1000\n")
    result = grade_workspace(fixture, workspace, sandbox=backend)
    assert result.outcome == Outcome.incorrect and result.tampered is False, result
    assert any("grading's deadline" in c.evidence for c in result.criteria), result.criteria[:2]


def test_full_workspace_disk_leaves_the_judge_its_report(fixtures, backend, tmp_path):
    """The workspace and the report share one capped tmpfs (the grading folder): the subject
    fills it, and the judge must still write its report on a disk of its own. Memory is high
    enough that the disk, not the memory limit, runs out; at most 512 MB is written, should
    the cap be missing."""
    fill = ("def answer():\n    try:\n        for n in range(64):\n"
            "            with open(f'fill-{n}.bin', 'wb') as out:\n"
            "                out.write(b'\\1' * (8 << 20))\n"
            "    except OSError:\n        return 41\n    return 41\n")
    result = graded(fixtures["roomy"], backend, tmp_path, {"app.py": fill})
    assert result.outcome == Outcome.incorrect and result.tampered is False, result
    assert "disk limit" not in (result.reason or ""), result.reason
    assert "no total disk cap" not in (result.reason or ""), result.reason  # it was full


@pytest.mark.parametrize("code", [
    "import os, signal, time\n\ndef answer():\n    if os.fork() == 0:\n        os.setsid()\n"
    "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n        if os.fork() == 0:\n"
    "            time.sleep(1000)\n        os._exit(0)\n    return 41\n",
    "import os, sys\nsys.stderr.write('bwrap: Creating new namespace failed\\n')\n"
    "sys.stderr.flush()\nos._exit(1)\n",
], ids=["leaves a daemon", "imitates a bwrap refusal"])
def test_subject_leaves_nothing_and_is_graded_as_itself(fixtures, backend, tmp_path, code):
    """The subject's sandbox, like the in-process one: nothing it starts outlives the grading,
    and a line that looks like the sandbox's own refusal is the subject's output, not an
    infrastructure error (which would make the grade a grading_failure)."""
    result = graded(fixtures["fast"], backend, tmp_path, {"app.py": code})
    assert result.outcome == Outcome.incorrect and result.tampered is False, result
    assert leftovers(backend, tempfile.tempdir) == []
