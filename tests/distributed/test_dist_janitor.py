"""What a crashed grading leaves behind is swept by the grading workers' janitor.

Leftovers are made the way a killed grading worker leaves them: a cgroup with a process still
in it and a size-capped tmpfs, each named after a process that is gone, and a Docker container
past the deadline written on it. Live leftovers (owner alive, deadline ahead) must survive.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import docker
import pytest

from dist_support import Procs, evalq_env, wait_for
from evalq.graders import janitor
from evalq.graders.sandbox import get_sandbox
from evalq.graders.sandbox.cgroups import PREFIX, ROOT
from evalq.graders.sandbox.docker import LABEL_CREATED, LABEL_DEADLINE, LABEL_LABEL, LABEL_SANDBOX
from evalq.graders.sandbox.scratch import DIR_PREFIX, SOURCE, _capped_mounts

# the sweep is machine-wide: another test's worker would sweep this one's planted orphans
pytestmark = pytest.mark.serial

IMAGE = "evalq-grader-python:local"


def _reaped() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _cgroup(owner: int) -> tuple[Path, subprocess.Popen]:
    """A cgroup named for `owner`, holding a sleeping process (what a killed grading leaves)."""
    parent = ROOT / "pids" if (ROOT / "pids").is_dir() else ROOT
    path = parent / f"{PREFIX}{owner}-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    sleeper = subprocess.Popen(["sleep", "600"])
    (path / "cgroup.procs").write_text(str(sleeper.pid))
    return path, sleeper


def _tmpfs(owner: int) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{owner}-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", SOURCE, str(path)], check=True)
    (path / "left-behind.txt").write_text("workspace of a crashed grading")
    return path


def _container(client, label: str, deadline: float):
    now = int(time.time())
    container = client.containers.create(
        IMAGE, ["sleep", "600"], network_mode="none",
        labels={LABEL_SANDBOX: "1", LABEL_LABEL: label, LABEL_CREATED: str(now),
                LABEL_DEADLINE: str(int(deadline))})
    container.start()
    return container


@pytest.fixture
def leftovers():
    dead = _reaped()
    made = {"orphan_cgroup": _cgroup(dead), "live_cgroup": _cgroup(os.getpid()),
            "orphan_mount": _tmpfs(dead), "live_mount": _tmpfs(os.getpid())}
    yield made
    for key in ("orphan_cgroup", "live_cgroup"):
        path, sleeper = made[key]
        sleeper.kill()
        sleeper.wait()
        for _ in range(100):  # the kernel frees the cgroup once its last process is reaped
            try:
                path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.01)
    for key in ("orphan_mount", "live_mount"):
        subprocess.run(["umount", "-l", str(made[key])], capture_output=True)
        subprocess.run(["rm", "-rf", str(made[key])])


def _assert_swept_bwrap(made) -> None:
    orphan_cgroup, orphan_sleeper = made["orphan_cgroup"]
    live_cgroup, live_sleeper = made["live_cgroup"]
    assert not orphan_cgroup.exists() and orphan_sleeper.wait(10) is not None
    assert live_cgroup.exists() and live_sleeper.poll() is None
    mounts = _capped_mounts()
    assert made["orphan_mount"] not in mounts and not made["orphan_mount"].exists()
    assert made["live_mount"] in mounts and (made["live_mount"] / "left-behind.txt").exists()


def test_bwrap_sweep_removes_only_orphans(leftovers):
    assert janitor.sweep_once(get_sandbox("bwrap")) >= 2
    _assert_swept_bwrap(leftovers)


def test_docker_sweep_removes_containers_past_their_deadline():
    client = docker.from_env()
    label = f"janitor-{uuid.uuid4().hex[:8]}"
    past = _container(client, label, time.time() - 1)
    ahead = _container(client, label, time.time() + 600)
    try:
        assert janitor.sweep_once(get_sandbox("docker")) >= 1
        ids = {c.id for c in client.containers.list(all=True,
                                                    filters={"label": f"{LABEL_LABEL}={label}"},
                                                    ignore_removed=True)}
        assert past.id not in ids and ahead.id in ids
    finally:
        for c in client.containers.list(all=True, filters={"label": f"{LABEL_LABEL}={label}"},
                                        ignore_removed=True):
            c.remove(force=True)
        client.close()


def worker_env(tmp_path: Path, redis_url: str, **sandbox: str) -> dict[str, str]:
    """A worker's settings for a janitor test (also tests/agent_sandbox/test_agent_janitor.py)."""
    return evalq_env({"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_BROKER_URL": redis_url,
                      "EVALQ_DATABASE_URL": f"sqlite:///{tmp_path / 'r.db'}", **sandbox})


def test_a_grading_worker_sweeps_when_it_starts(tmp_path, leftovers, redis_url):
    env = worker_env(tmp_path, redis_url, EVALQ_SANDBOX="bwrap")
    procs = Procs(tmp_path)
    try:
        procs.worker("grader", "host-g", "grading", env)
        wait_for(lambda: not leftovers["orphan_cgroup"][0].exists()
                 and not leftovers["orphan_mount"].exists()
                 and "of crashed gradings" in procs.log("grader"), 60,
                 "the grading worker's janitor to sweep the orphans and say so")
    finally:
        procs.stop_all()
    swept = re.search(r"removed (\d+) leftover\(s\) of crashed gradings", procs.log("grader"))
    assert swept and int(swept.group(1)) >= 2, procs.log("grader")
    _assert_swept_bwrap(leftovers)


def test_sweep_removes_orphan_grading_folders_however_deep():
    """A killed worker's uncapped grading folder (Docker's) holds whatever the graded code
    wrote, a 3,000-deep tree included; the sweep removes it, and leaves a live one alone."""
    from evalq.graders.sandbox.cleanup import remove_tree

    orphan = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{_reaped()}-"))
    live = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-"))
    try:
        fd = os.open(orphan, os.O_RDONLY)
        for _ in range(3000):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(fd)
        assert janitor.sweep_once(get_sandbox("docker")) >= 1
        assert not orphan.exists() and live.is_dir()
    finally:
        assert remove_tree(orphan) == [] and remove_tree(live) == []
