"""A sweep removes a grading folder only when its maker is gone, judged in the maker's own pid
namespace: grading workers in several containers share one scratch folder (compose), and a
pid from another container means nothing here."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from evalq.graders.sandbox import scratch
from evalq.graders.sandbox.owner import owned_name, pid_namespace


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_orphans_of_this_pid_namespace_go_young(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = _dead_pid()
    prefix = scratch.DIR_PREFIX
    mine_live = tmp_path / f"{owned_name(prefix)}live"
    mine_dead = tmp_path / f"{prefix}{pid_namespace()}.{dead}-dead"
    theirs = tmp_path / f"{prefix}{pid_namespace() + 1}.{dead}-other-container"
    for folder in (mine_live, mine_dead, theirs):
        folder.mkdir()
    assert scratch.sweep_folders(max_age_seconds=3600) == 1
    assert not mine_dead.exists(), "an orphan of this namespace goes at once"
    assert mine_live.exists() and theirs.exists(), "a live grading, and one of another container"
    old = time.time() - 7200
    os.utime(theirs, (old, old))
    assert scratch.sweep_folders(max_age_seconds=3600) == 1
    assert not theirs.exists(), "past the max age anyone's leftover goes"
    assert mine_live.exists()
