"""Packing and unpacking hostile workspaces and archives (issue 14, item 6), without a sandbox.

Every case ends with a named drop or an EvalqError, never a traceback of another kind; the
trees are built relative to each level so the test itself never needs a long path.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import socket
import stat
import tarfile

import pytest

from evalq.errors import EvalqError
from evalq.fixtures import archive as ws_mod
from evalq.graders.sandbox.cleanup import remove_tree
from evalq.fixtures.archive import (BadArchive, WorkspaceTooLarge, pack_workspace,
                                     unpack_workspace)
from evalq.treewalk import walk


def chain(root, depth: int, name: str = "d") -> None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.mkfifo("pipe-at-the-bottom", dir_fd=fd)
    os.close(fd)


@pytest.fixture
def hostile(tmp_path):
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ok.py").write_text("print('ok')\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o755)
    sock = socket.socket(socket.AF_UNIX)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        sock.bind("s.sock")
    finally:
        os.chdir(cwd)
    os.mkfifo(root / "fifo")
    os.mknod(root / "zero", stat.S_IFCHR | 0o666, os.makedev(1, 5))
    (root / "a.txt").write_text("a\n")
    os.link(root / "a.txt", root / "b.txt")
    os.symlink("../../etc/passwd", root / "src" / "up")
    (root / "deep").mkdir()
    chain(root / "deep", 1500)
    yield root
    sock.close()
    assert remove_tree(tmp_path) == []


def test_every_kind_is_dropped_and_named_and_packing_is_deterministic(hostile, tmp_path):
    data = pack_workspace(hostile)
    assert pack_workspace(hostile) == data
    dropped = unpack_workspace(data, tmp_path / "out")
    for named in ("s.sock: unix socket dropped", "fifo: FIFO dropped",
                  "zero: character device dropped", "a.txt: hard link dropped",
                  "b.txt: hard link dropped", "src/up: symlink to ../../etc/passwd dropped",
                  "directory deeper than 64 levels"):
        assert any(named in d for d in dropped), (named, dropped)
    out = tmp_path / "out"
    assert (out / "src" / "ok.py").read_text() == "print('ok')\n"
    assert os.stat(out / "run.sh").st_mode & 0o111
    depth = max(e.depth for e in walk(out, max_depth=10_000))
    assert depth == 64  # "deep" and 63 levels of its chain kept; the 65th level is cut
    kept = {e.name for e in walk(out) if not e.is_dir}
    assert kept == {"src/ok.py", "run.sh"}


def test_packing_does_not_depend_on_the_clock(tmp_path, monkeypatch):
    """The same tree packed in two different seconds is the same archive (and digest)."""
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(gzip.time, "time", lambda: 1_000_000_000.0)
    first = pack_workspace(tmp_path / "w")
    monkeypatch.setattr(gzip.time, "time", lambda: 1_700_000_000.0)
    assert pack_workspace(tmp_path / "w") == first
    assert first[4:8] == b"\0\0\0\0", "the gzip header's time is zero"


def test_the_list_of_drops_is_capped_with_counts_by_kind(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    for n in range(120):
        os.mkfifo(root / f"p{n:03}")
    dropped = unpack_workspace(pack_workspace(root), tmp_path / "out")
    assert len(dropped) == ws_mod.NAMED_DROPS + 1
    assert dropped[-1] == "70 more dropped (all drops by kind: FIFO 120)"


def test_limits_are_evalq_errors_the_runner_records(tmp_path, monkeypatch):
    root = tmp_path / "ws"
    root.mkdir()
    with open(root / "sparse", "wb") as f:
        f.truncate(ws_mod.MAX_WORKSPACE_BYTES + 1)
    with pytest.raises(WorkspaceTooLarge, match="sparse"):
        pack_workspace(root)
    os.unlink(root / "sparse")
    for n in range(30):
        (root / f"f{n}").write_text("x")
    monkeypatch.setattr(ws_mod, "MAX_ENTRIES", 20)
    with pytest.raises(WorkspaceTooLarge, match="over 20 entries"):
        pack_workspace(root)
    assert issubclass(WorkspaceTooLarge, EvalqError) and issubclass(BadArchive, EvalqError)


def _archive(members, pax=None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT,
                      pax_headers=pax or {}) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _member(name, kind=tarfile.REGTYPE, data=b"x", link=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data if kind == tarfile.REGTYPE else None


def test_hostile_archives_are_refused_member_by_member(tmp_path):
    data = _archive([
        _member("../escape.txt"), _member("/etc/evil"), _member("a/../../up"),
        _member("link", tarfile.SYMTYPE, link="/etc/shadow"),
        _member("hard", tarfile.LNKTYPE, link="/etc/shadow"),
        _member("dev", tarfile.CHRTYPE), _member("fifo", tarfile.FIFOTYPE),
        _member("/".join(["d"] * 80) + "/deep.txt"), _member("x" * 2000),
        _member("file"), _member("file/under-a-file"), _member("ok/fine.txt", data=b"fine"),
    ], pax={ws_mod.DROPPED_KEY: json.dumps(["p: FIFO dropped"] * 500)})
    dest = tmp_path / "out"
    dropped = unpack_workspace(data, dest)
    text = "\n".join(dropped)
    for name in ("../escape.txt: path escapes", "/etc/evil: path escapes",
                 "a/../../up: path escapes", "link: symlink to /etc/shadow",
                 "hard: hard link to /etc/shadow", "dev: character device", "fifo: FIFO",
                 "deeper than 64 levels", "path over 1024 characters",
                 "file/under-a-file: cannot be written"):
        assert name in text, (name, dropped)
    # what packing claims to have dropped is capped too (the archive is hostile input)
    assert dropped.count("p: FIFO dropped") == ws_mod.NAMED_DROPS + 1
    assert {e.name for e in walk(tmp_path) if not e.is_dir} == {"out/file", "out/ok/fine.txt"}


def test_bombs_and_garbage_are_bad_archives(tmp_path, monkeypatch):
    monkeypatch.setattr(ws_mod, "MAX_WORKSPACE_BYTES", 1024 * 1024)
    monkeypatch.setattr(ws_mod, "TAR_OVERHEAD", 1024 * 1024)
    bomb = gzip.compress(b"\0" * (4 * 1024 * 1024))
    with pytest.raises(BadArchive, match="expands past"):
        unpack_workspace(bomb, tmp_path / "a")
    with pytest.raises(BadArchive, match="not gzip"):
        unpack_workspace(b"PK\x03\x04 not a tar", tmp_path / "b")
    with pytest.raises(BadArchive, match="unreadable"):
        unpack_workspace(gzip.compress(b"\x01" * 1024), tmp_path / "c")


def test_remove_tree_takes_what_rmtree_cannot(tmp_path):
    root = tmp_path / "victim"
    root.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    chain(root, 3000, name="dddddddddd")
    os.symlink(outside, root / "to-outside")
    os.symlink(tmp_path, root / "to-parent")
    (root / "locked").mkdir()
    (root / "locked" / "f").write_text("x")
    os.chmod(root / "locked", 0)
    assert remove_tree(root) == []
    assert not root.exists() and outside.read_text() == "keep me\n"
    assert remove_tree(root) == []  # gone already: nothing to do, no error
