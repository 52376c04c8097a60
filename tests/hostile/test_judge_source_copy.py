"""The judge's copy of the workspace (graders/source_copy.py): regular files only, within caps.

The agent left the workspace, so its links may point at the grader's host, its files may be
huge or countless; the copy holds none of the links, no file over the per-file cap, and stops
at its caps with the smallest files (the source) in. Read in the judge (evalq_judge.source),
a missing file fails the check that needs it, with the reason.
"""

from __future__ import annotations

import os
import stat

import pytest

from evalq.graders import source_copy
from evalq.graders.source_copy import copy_source
from evalq.graders.split import JUDGE_PACKAGE


@pytest.fixture
def judge_source(monkeypatch):
    """evalq_judge's source module, imported as the judge imports it (a package of that name)."""
    monkeypatch.syspath_prepend(str(JUDGE_PACKAGE.parent))
    import importlib

    module = importlib.import_module("judge.source")
    return module


def test_links_and_special_files_are_not_copied(tmp_path):
    work = tmp_path / "workspace"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "mod.py").write_text("x = 1\n")
    secret = tmp_path / "host-secret"
    secret.write_text("the grader's\n")
    (work / "pkg" / "link.py").symlink_to(secret)
    (work / "outside").symlink_to(tmp_path)
    os.mkfifo(work / "pipe")
    (tmp_path / "grading").mkdir()
    copy = copy_source(work, tmp_path / "grading")
    found = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*"))
    assert found == ["pkg", "pkg/mod.py"], found
    assert (copy / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert stat.S_IMODE((copy / "pkg" / "mod.py").stat().st_mode) == 0o644
    assert stat.S_IMODE((copy / "pkg").stat().st_mode) == 0o755


def test_caps_keep_the_smallest_files(tmp_path, monkeypatch):
    monkeypatch.setattr(source_copy, "MAX_TOTAL_BYTES", 1000)
    monkeypatch.setattr(source_copy, "MAX_FILES", 3)
    work = tmp_path / "workspace"
    work.mkdir()
    (work / "big.bin").write_bytes(b"x" * (source_copy.MAX_FILE_BYTES + 1))
    (work / "medium.dat").write_bytes(b"x" * 900)
    for name in ("a.py", "b.py", "c.py", "d.py"):
        (work / name).write_text(name)
    (tmp_path / "grading").mkdir()
    copy = copy_source(work, tmp_path / "grading")
    assert sorted(p.name for p in copy.iterdir()) == ["a.py", "b.py", "c.py"]


def test_a_file_left_out_fails_the_check_that_needs_it(tmp_path, monkeypatch, judge_source):
    work = tmp_path / "workspace"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "__init__.py").write_text("from .mod import f\n")
    (work / "pkg" / "mod.py").write_text("def f(:\n")
    (work / "pkg" / "linked.py").symlink_to(work / "pkg" / "__init__.py")
    (tmp_path / "grading").mkdir()
    copy = copy_source(work, tmp_path / "grading")
    monkeypatch.setenv(judge_source.SOURCE_ENV, str(copy))
    assert judge_source.module_source("pkg") == "from .mod import f\n"
    assert judge_source.source_tree("pkg").body[0].module == "mod"
    with pytest.raises(judge_source.SourceMissing, match="does not parse"):
        judge_source.source_tree("pkg.mod")
    with pytest.raises(judge_source.SourceMissing, match="not in the workspace"):
        judge_source.module_source("pkg.linked")
    with pytest.raises(ValueError, match="relative to the workspace"):
        judge_source.source_text("../grading")
    assert issubclass(judge_source.SourceMissing, AssertionError)  # a failed check


def test_deeply_nested_source_fails_its_check_not_the_judge(tmp_path, monkeypatch, judge_source):
    (tmp_path / "deep.py").write_text("x = " + "(" * 5000 + ")" * 5000 + "\n")
    monkeypatch.setenv(judge_source.SOURCE_ENV, str(tmp_path))
    with pytest.raises(judge_source.SourceMissing, match="does not parse"):
        judge_source.source_tree("deep.py")
