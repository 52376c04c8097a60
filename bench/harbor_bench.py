"""Harbor tasks: building and exporting a task environment, and the cost of grading a task
against the floor of running its `tests/test.sh` in a plain container of the same image
(`docker run` with the workspace, tests and log folder mounted), alternated in one run.

The target: grading costs at most 1.5x the plain container, per backend.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from .figures import Figure, ratio

TASK = {
    "task.toml": 'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 60.0\n'
                 '[environment]\nmemory = "512M"\nallow_internet = false\n',
    "instruction.md": "Make add() in /app/calc.py return the sum.\n",
    "environment/Dockerfile": "FROM evalq-grader-python:local\nUSER 0:0\nWORKDIR /app\n"
                              "COPY calc.py /app/calc.py\n",
    "environment/calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\ncd /app\n"
                     "if python3 -m pytest -q -p no:cacheprovider /tests/test_calc.py; then "
                     "echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n",
    "tests/test_calc.py": "import sys\nsys.path.insert(0, '/app')\nfrom calc import add\n\n\n"
                          "def test_add():\n    assert add(2, 3) == 5\n",
    "solution/solve.sh": "#!/bin/bash\nsed -i 's/a - b/a + b/' /app/calc.py\n",
}


#: a task id for the build measured alone (its tree and image are removed at once)
BUILD_ONLY = "bench-harbor-build-only"


def _write_task(folder: Path) -> Path:
    for rel, text in TASK.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def plain_container(fixture, workspace: Path) -> float:
    """Seconds `docker run` of test.sh takes over a copy of the workspace (reward must be 1)."""
    import shutil

    with tempfile.TemporaryDirectory(prefix="evalq-bench-plain-") as tmp:
        work, logs = Path(tmp) / "app", Path(tmp) / "logs"
        shutil.copytree(workspace, work)
        logs.mkdir()
        for folder in (Path(tmp), work, logs):
            os.chmod(folder, 0o777)
        started = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{work}:/app",
                        "-v", f"{fixture.hidden_dir / 'tests'}:/tests:ro",
                        "-v", f"{logs}:/logs/verifier", "-w", "/app", fixture.spec.image,
                        "bash", "/tests/test.sh"], check=True, capture_output=True)
        took = time.perf_counter() - started
        if (logs / "reward.txt").read_text().strip() != "1":
            raise RuntimeError("the plain container's verifier did not give reward 1")
    return took


def graded(fixture, workspace: Path, sandbox: str) -> float:
    from evalq.graders.grade import grade_workspace
    from evalq.models import Outcome

    started = time.perf_counter()
    result = grade_workspace(fixture, workspace, sandbox=sandbox)
    took = time.perf_counter() - started
    if result.outcome != Outcome.correct:
        raise RuntimeError(f"{sandbox}: the oracle graded {result.outcome.value}: {result.reason}")
    return took


def run(workdir: Path, n: int, sandboxes: list[str], log) -> tuple[list[Figure], dict]:
    from evalq.fixtures.fixture import load_fixture
    from evalq.fixtures.harbor.environment import build_environment, remove_environment
    from evalq.fixtures.harbor.importer import import_task
    from evalq.graders.grade import prepare_reference

    workdir.mkdir(parents=True, exist_ok=True)
    task = _write_task(workdir / "bench-harbor-add")
    figures, data = [], {}
    try:
        log("building and exporting a Harbor environment, then importing the task")
        started = time.perf_counter()
        build_environment(BUILD_ONLY, task / "environment", None, 600)
        build_s = time.perf_counter() - started
        remove_environment(BUILD_ONLY)
        started = time.perf_counter()
        fixture = load_fixture(import_task(task, workdir / "fixtures").path)
        import_s = time.perf_counter() - started
        figures += [Figure(name="Harbor task import (build, export, digest, image, oracle)",
                           value=import_s, unit="s"),
                    Figure(name="Harbor environment build and export alone", value=build_s,
                           unit="s")]
        workspace = prepare_reference(fixture, "correct", workdir / "ws")
        plain_container(fixture, workspace)  # warm the image and page cache
        for sandbox in sandboxes:
            graded(fixture, workspace, sandbox)
            log(f"grading the Harbor task {n}x on {sandbox} and {n}x in a plain container")
            ours, floor = [], []
            for _ in range(n):
                ours.append(graded(fixture, workspace, sandbox))
                floor.append(plain_container(fixture, workspace))
            mine, plain = statistics.median(ours), statistics.median(floor)
            data[sandbox] = {"graded_seconds": ours, "plain_container_seconds": floor}
            figures.append(Figure(
                name=f"grading a Harbor task ({sandbox})", value=mine, unit="s",
                ratio=ratio(mine, plain), reference="test.sh in a plain container",
                target=1.5, note=f"median of {n}; plain container {plain:.3f} s"))
        data["import_seconds"], data["build_seconds"] = import_s, build_s
    finally:
        remove_environment(task.name)
    return figures, data
