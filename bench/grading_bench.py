"""Grading cost of the judge/subject split against the in-process run of the same checks.

One fixture (py-slugify-bugfix, correct reference) graded as shipped (verdict = "judge": two
sandboxes and a channel) and as an in-process copy whose hidden tests import the code
directly; the ratio of the medians is the split's cost (issue 14: under 1.5x on bwrap).
"""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from .figures import Figure, ratio

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "py-slugify-bugfix"
IN_PROCESS_COMMAND = ('["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", '
                      '"--junitxml={report_dir}/junit.xml", "hidden_tests"]')


def in_process_copy(dest: Path):
    """The same checks, run in the agent code's process (the old style)."""
    from evalq.fixtures.fixture import freeze_fixture, load_fixture

    shutil.copytree(FIXTURE, dest)
    test = dest / "hidden" / "hidden_tests" / "test_slug_hidden.py"
    test.write_text(test.read_text().replace(
        "from evalq_judge import load_subject", "import importlib").replace(
        'load_subject("textutil")', 'importlib.import_module("textutil")'))
    spec = dest / "fixture.toml"
    spec.write_text(spec.read_text().replace('command = ["pytest", "hidden_tests"]',
                                             f"command = {IN_PROCESS_COMMAND}").replace(
        'verdict = "judge"\n', 'verdict = "in-process"\n'))
    freeze_fixture(dest)
    return load_fixture(dest)


def timed(fixture, sandbox: str, n: int, workdir: Path) -> list[float]:
    from evalq.graders.grade import grade_workspace, prepare_reference
    from evalq.models import Outcome

    workspace = workdir / f"ws-{fixture.spec.grade.verdict}"
    if not workspace.exists():
        prepare_reference(fixture, "correct", workspace)
    times = []
    for _ in range(n):
        started = time.perf_counter()
        graded = grade_workspace(fixture, workspace, sandbox=sandbox)
        times.append(time.perf_counter() - started)
        if graded.outcome != Outcome.correct:
            raise RuntimeError(f"{sandbox}: the correct reference graded {graded.outcome.value}: "
                               f"{graded.reason}")
    return times


def run(workdir: Path, n: int, sandboxes: list[str], log) -> tuple[list[Figure], dict]:
    from evalq.fixtures.fixture import load_fixture

    workdir.mkdir(parents=True, exist_ok=True)
    judged, plain = load_fixture(FIXTURE), in_process_copy(workdir / "in-process")
    figures, data = [], {}
    for sandbox in sandboxes:
        log(f"grading {n}x judged and {n}x in-process on {sandbox}")
        timed(judged, sandbox, 1, workdir)  # warm caches (images, page cache) for both
        split_t, plain_t = timed(judged, sandbox, n, workdir), timed(plain, sandbox, n, workdir)
        split_m, plain_m = statistics.median(split_t), statistics.median(plain_t)
        data[sandbox] = {"judged_seconds": split_t, "in_process_seconds": plain_t}
        figures.append(Figure(name=f"grading with the judge/subject split ({sandbox})",
                              value=split_m, unit="s", ratio=ratio(split_m, plain_m),
                              reference="in-process grading",
                              target=1.5 if sandbox == "bwrap" else None,
                              note=f"median of {n}; in-process {plain_m:.3f} s"))
    return figures, data
