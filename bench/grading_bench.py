"""Grading cost of the judge/subject split against the in-process run of the same checks.

Two fixtures, correct reference, each graded as shipped (verdict = "judge": two sandboxes, a
channel, the judge's copy of the workspace and the folder judge and subject share) and as an
in-process copy whose hidden tests call the code directly: py-slugify-bugfix (calls only) and
py-durations-refactor (calls, plus files made, dated and source read by the judge). The ratio
of the medians is the split's cost (under 1.5x on bwrap).
"""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from .figures import Figure, ratio

SUITE = Path(__file__).resolve().parent.parent / "fixtures"
FIXTURES = {"py-slugify-bugfix": "calls", "py-durations-refactor": "calls, files, source"}
IN_PROCESS_COMMAND = ('["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", '
                      '"--junitxml={report_dir}/junit.xml", "hidden_tests"]')
#: the judge's helpers done in the tests' own process, overlaid on the workspace's top
IN_PROCESS_HELPERS = '''"""evalq_judge's calls, in-process: the bench's baseline."""
import importlib
import inspect
import os
import pathlib
import tempfile

load_subject = importlib.import_module


def tmp_dir(writable=True):
    return pathlib.Path(tempfile.mkdtemp())


def write_text(path, text):
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text(text)


def set_mtime(path, seconds):
    os.utime(path, (seconds, seconds))


def module_source(module):
    return inspect.getsource(importlib.import_module(module))
'''


def in_process_copy(fixture_id: str, dest: Path):
    """The same checks, run in the agent code's process (the old style)."""
    from evalq.fixtures.fixture import freeze_fixture, load_fixture

    shutil.copytree(SUITE / fixture_id, dest)
    (dest / "hidden" / "evalq_judge.py").write_text(IN_PROCESS_HELPERS)
    spec = dest / "fixture.toml"
    spec.write_text(spec.read_text().replace('command = ["pytest", "hidden_tests"]',
                                             f"command = {IN_PROCESS_COMMAND}").replace(
        'verdict = "judge"\n', 'verdict = "in-process"\n'))
    freeze_fixture(dest)
    return load_fixture(dest)


def timed(fixture, sandbox: str, workdir: Path) -> float:
    """Seconds one grading of the correct reference takes (it must grade correct)."""
    from evalq.graders.grade import grade_workspace, prepare_reference
    from evalq.models import Outcome

    workspace = workdir / f"ws-{fixture.id}-{fixture.spec.grade.verdict}"
    if not workspace.exists():
        prepare_reference(fixture, "correct", workspace)
    started = time.perf_counter()
    graded = grade_workspace(fixture, workspace, sandbox=sandbox)
    took = time.perf_counter() - started
    if graded.outcome != Outcome.correct:
        raise RuntimeError(f"{sandbox}: the correct reference graded {graded.outcome.value}: "
                           f"{graded.reason}")
    return took


def alternated(judged, plain, sandbox: str, n: int, workdir: Path):
    """n timings of each, taken in turn, so that both see the same load on a shared machine."""
    split_t, plain_t = [], []
    for _ in range(n):
        split_t.append(timed(judged, sandbox, workdir))
        plain_t.append(timed(plain, sandbox, workdir))
    return split_t, plain_t


def run(workdir: Path, n: int, sandboxes: list[str], log) -> tuple[list[Figure], dict]:
    from evalq.fixtures.fixture import load_fixture

    workdir.mkdir(parents=True, exist_ok=True)
    figures, data = [], {}
    for fixture_id, uses in FIXTURES.items():
        judged = load_fixture(SUITE / fixture_id)
        plain = in_process_copy(fixture_id, workdir / f"in-process-{fixture_id}")
        for sandbox in sandboxes:
            log(f"grading {fixture_id} {n}x judged and {n}x in-process on {sandbox}")
            alternated(judged, plain, sandbox, 1, workdir)  # warm caches (images, page cache)
            split_t, plain_t = alternated(judged, plain, sandbox, n, workdir)
            split_m, plain_m = statistics.median(split_t), statistics.median(plain_t)
            data[f"{fixture_id} {sandbox}"] = {"judged_seconds": split_t,
                                               "in_process_seconds": plain_t}
            figures.append(Figure(
                name=f"grading with the judge/subject split, {fixture_id} ({uses}; {sandbox})",
                value=split_m, unit="s", ratio=ratio(split_m, plain_m),
                reference="in-process grading", target=1.5 if sandbox == "bwrap" else None,
                note=f"median of {n}; in-process {plain_m:.3f} s"))
    return figures, data
