"""Hostile trees in the workspace, in both backends (issue 14, item 6).

Made by the agent (so packing meets them) or by the agent's code while it is graded (so the
sandbox's cleanup meets them): unix sockets, FIFOs, devices, hard links, symlinks and trees
thousands of levels deep. Each grading ends with an outcome whose reason names what was
dropped, by kind, and leaves no file, mount, process or container behind (checked from
outside: the grading temp dir, the mount table, ps and the engine).
"""

from __future__ import annotations

import os
import socket
import stat
import tempfile
import textwrap
from pathlib import Path

import pytest

from evalq.graders.grade import grade_workspace
from evalq.graders.sandbox.cleanup import remove_tree
from evalq.models import Outcome
from evalq.unix_sockets import bound_unix_socket
from test_hostile_solutions import backend, grading_tmp, leftovers, make_fixture  # noqa: F401

DEPTH_AT_PACKING = 1500
DEPTH_AT_GRADING = 3000


def _deep(root: Path, depth: int) -> None:
    """A chain of `depth` directories, made relative to each level (no path grows with it)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


@pytest.fixture(autouse=True)
def deep_leftovers_removed(grading_tmp):  # noqa: F811 - runs before grading_tmp's rmtree
    """Should a grading leave a deep tree, remove it here: shutil.rmtree would recurse."""
    yield
    for name in os.listdir(grading_tmp):
        remove_tree(Path(grading_tmp) / name)


def nothing_left(backend) -> None:
    """No grading folder, mount, process or container of this test remains on the host."""
    folder = tempfile.tempdir
    assert os.listdir(folder) == [], os.listdir(folder)
    mounts = Path("/proc/self/mountinfo").read_text()
    assert folder not in mounts
    assert leftovers(backend, folder) == []


def test_trees_the_agent_left_are_dropped_and_named(backend, tmp_path):
    fixture = make_fixture(tmp_path / "fixture")
    ws = tmp_path / "agent-workspace"
    ws.mkdir()
    (ws / "app.py").write_text("def attack():\n    return True\n")
    listener = bound_unix_socket(ws / "agent.sock")  # any basetemp's length
    os.mkfifo(ws / "pipe")
    os.mknod(ws / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.mknod(ws / "loop", stat.S_IFBLK | 0o600, os.makedev(7, 0))
    (ws / "notes.txt").write_text("shared\n")
    os.link(ws / "notes.txt", ws / "notes-again.txt")
    os.symlink("/etc/hostname", ws / "host-file")
    (ws / "tree").mkdir()
    _deep(ws / "tree", DEPTH_AT_PACKING)
    try:
        graded = grade_workspace(fixture, ws, sandbox=backend)
    finally:
        listener.close()
        assert remove_tree(ws / "tree") == []  # pytest's own rmtree would recurse 1,500 deep
    # What travels is graded as usual; what cannot travel is named in the reason, by kind.
    assert graded.outcome == Outcome.correct, graded
    for named in ("agent.sock: unix socket", "pipe: FIFO", "null: character device",
                  "loop: block device", "notes.txt: hard link", "notes-again.txt: hard link",
                  "host-file: symlink to /etc/hostname", "deeper than 64 levels"):
        assert named in graded.reason, (named, graded.reason)
    nothing_left(backend)


GRADING_TIME = f"""
import os, socket

def attack():
    socks = []
    for n in range(3):
        s = socket.socket(socket.AF_UNIX)
        s.bind(f"s{{n}}.sock")
        socks.append(s)
    os.mkfifo("pipe")
    open("f", "w").write("x")
    os.link("f", "f-again")
    os.symlink("/", "root-link")
    fd = os.open(".", os.O_RDONLY)
    for _ in range({DEPTH_AT_GRADING}):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.mkfifo("pipe", dir_fd=fd)
    os.close(fd)
    return False
"""


def test_trees_made_while_graded_are_cleaned_up(backend, tmp_path):
    fixture = make_fixture(tmp_path / "fixture")
    ws = tmp_path / "agent-workspace"
    ws.mkdir()
    (ws / "app.py").write_text(textwrap.dedent(GRADING_TIME))
    graded = grade_workspace(fixture, ws, sandbox=backend)
    assert graded.outcome == Outcome.incorrect, graded
    assert "test_attack_worked" in graded.reason
    assert "RecursionError" not in graded.output_tail
    nothing_left(backend)
