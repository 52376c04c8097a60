"""The folder judge and subject share cannot be turned against the judge.

The agent's code (the subject) plants links, FIFOs, an oversized file and folders swapped for
links where the judge's checks read and write (evalq_judge's files.py), and tries to change
what the judge put in a read-only folder or to add to the shared folder's top. Each hidden
check below asserts the judge's side of that: nothing followed, nothing waited on, nothing
read past its cap, nothing of the judge's overwritten. All of them pass; the grading is
`incorrect` only for the wrong answer (41 for 42), in both backends.
"""

from __future__ import annotations

import pytest
from hostile_backend import backend, traversable_tempdir  # noqa: F401 (the fixture)

from evalq.graders.grade import grade_workspace
from evalq.models import Outcome
from test_judge_split import make_fixture

AGENT = '''import os


def answer():
    return 41


def plant_link(path, target):
    os.symlink(target, path)


def plant_fifo(path):
    os.mkfifo(path)


def write_big(path, size):
    with open(path, "wb") as out:
        out.write(b"x" * size)


def swap_for_link(folder, target):
    os.rename(folder, folder + ".gone")
    os.symlink(target, folder)


def try_write(path):
    try:
        with open(path, "w") as out:
            out.write("agent")
        return "written"
    except OSError as exc:
        return type(exc).__name__


def try_replace(path, scratch):
    try:
        with open(scratch, "w") as out:
            out.write("agent")
        os.replace(scratch, path)
        return "replaced"
    except OSError as exc:
        return type(exc).__name__


def read(path):
    with open(path) as given:
        return given.read()
'''
CHECKS = '''import pytest

from evalq_judge import SharedFileError, load_subject, read_text, tmp_dir, write_text

app = load_subject("app")


def test_answer():
    assert app.answer() == 42


@pytest.fixture
def victim(tmp_path):
    """A file of the judge's own, out of the subject's sight."""
    path = tmp_path / "victim.txt"
    path.write_text("untouched")
    return path


def test_a_planted_link_is_not_read(victim):
    folder = tmp_dir()
    app.plant_link(str(folder / "out.txt"), str(victim))
    with pytest.raises(SharedFileError, match="is a link"):
        read_text(folder / "out.txt")


def test_a_planted_fifo_is_not_waited_on():
    folder = tmp_dir()
    app.plant_fifo(str(folder / "out.txt"))
    with pytest.raises(SharedFileError, match="not a regular file"):
        read_text(folder / "out.txt")


def test_an_oversized_file_is_not_read_whole():
    folder = tmp_dir()
    app.write_big(str(folder / "big"), 17 * 1024 * 1024)
    with pytest.raises(SharedFileError, match="holds over"):
        read_text(folder / "big")


def test_writing_where_a_link_was_planted_replaces_the_link(victim):
    folder = tmp_dir()
    app.plant_link(str(folder / "in.txt"), str(victim))
    write_text(folder / "in.txt", "setup")
    assert victim.read_text() == "untouched"
    assert app.read(str(folder / "in.txt")) == "setup"


def test_a_folder_swapped_for_a_link_is_not_followed(victim):
    folder = tmp_dir()
    write_text(folder / "sub" / "victim.txt", "setup")
    app.swap_for_link(str(folder / "sub"), str(victim.parent))
    with pytest.raises(SharedFileError, match="a folder on the way is a link"):
        read_text(folder / "sub" / "victim.txt")
    with pytest.raises(SharedFileError, match="a folder on the way is a link"):
        write_text(folder / "sub" / "victim.txt", "overwritten")
    assert victim.read_text() == "untouched"


def test_a_read_only_folder_stays_as_the_judge_wrote_it():
    folder = tmp_dir(writable=False)
    write_text(folder / "drv.c", "int main(void) { return 0; }")
    assert app.try_write(str(folder / "drv.c")) == "PermissionError"
    assert app.try_write(str(folder / "new.c")) == "PermissionError"
    scratch = tmp_dir() / "copy.c"  # the same file system: a rename, refused
    assert app.try_replace(str(folder / "drv.c"), str(scratch)) == "PermissionError"
    assert read_text(folder / "drv.c") == "int main(void) { return 0; }"
    assert app.read(str(folder / "drv.c")) == "int main(void) { return 0; }"


def test_the_shared_folder_takes_nothing_from_the_subject():
    root = tmp_dir().parent
    assert app.try_write(str(root / "planted")) == "PermissionError"
'''
JUDGE_SIDE = {"test_a_planted_link_is_not_read", "test_a_planted_fifo_is_not_waited_on",
              "test_an_oversized_file_is_not_read_whole",
              "test_writing_where_a_link_was_planted_replaces_the_link",
              "test_a_folder_swapped_for_a_link_is_not_followed",
              "test_a_read_only_folder_stays_as_the_judge_wrote_it",
              "test_the_shared_folder_takes_nothing_from_the_subject"}


@pytest.fixture(autouse=True)
def grading_tmp(monkeypatch):
    with traversable_tempdir("evalq-shared-", monkeypatch) as folder:
        yield folder


def test_the_agents_code_cannot_turn_the_shared_folder_against_the_judge(backend, tmp_path):
    fixture = make_fixture(tmp_path / "shared", "judge", CHECKS)
    workspace = tmp_path / "agent-workspace"
    workspace.mkdir()
    (workspace / "app.py").write_text(AGENT)
    graded = grade_workspace(fixture, workspace, sandbox=backend)
    assert graded.outcome == Outcome.incorrect and graded.tampered is False, graded
    verdicts = {c.name.rsplit("::", 1)[-1]: c for c in graded.criteria}
    assert set(verdicts) == JUDGE_SIDE | {"test_answer"}, verdicts
    assert verdicts["test_answer"].passed is False
    failed = {name: c.evidence for name, c in verdicts.items()
              if name in JUDGE_SIDE and c.passed is not True}
    assert failed == {}, failed
