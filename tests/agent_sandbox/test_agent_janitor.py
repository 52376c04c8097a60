"""Agent workers sweep what crashed agent runs left, as grading workers do: a per-run cgroup
named after a worker process that is gone (bwrap), an agent container past its deadline
(Docker). Live leftovers (owner alive, deadline ahead) survive."""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from pathlib import Path

import docker
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "distributed"))

from dist_support import Procs, wait_for  # noqa: E402
from test_dist_janitor import _cgroup, _reaped, worker_env  # noqa: E402
from evalq.graders import janitor  # noqa: E402
from evalq.graders.sandbox.docker import container_labels  # noqa: E402
from evalq.graders.sandbox.base import SandboxLimits  # noqa: E402
from evalq.workers.sandbox import get_agent_sandbox  # noqa: E402
from evalq.workers.sandbox.docker import DEFAULT_IMAGE, LABEL_PHASE  # noqa: E402

# the sweep is machine-wide: another test's worker would sweep this one's planted orphans
pytestmark = pytest.mark.serial


def test_an_agent_worker_sweeps_orphan_agent_cgroups_when_it_starts(tmp_path, redis_url):
    orphan, orphan_sleeper = _cgroup(_reaped())
    live, live_sleeper = _cgroup(os.getpid())
    env = worker_env(tmp_path, redis_url, EVALQ_AGENT_SANDBOX="bwrap")
    procs = Procs(tmp_path)
    try:
        procs.worker("agents", "host-a", "agents", env)
        wait_for(lambda: not orphan.exists(), 60, "the agent worker's janitor to sweep")
        assert orphan_sleeper.wait(10) is not None
        assert live.exists() and live_sleeper.poll() is None
    finally:
        procs.stop_all()
        for sleeper in (orphan_sleeper, live_sleeper):
            sleeper.kill()
            sleeper.wait()
        for _ in range(100):
            try:
                live.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.01)
    assert re.search(r"removed \d+ leftover\(s\) of crashed agent runs", procs.log("agents"))


def test_docker_agent_sweep_removes_agent_containers_past_their_deadline():
    client = docker.from_env()
    label = f"agent-janitor-{uuid.uuid4().hex[:8]}"
    made = []
    for seconds in (-100, 600):  # deadline = now + wall + grace: one past, one ahead
        labels = container_labels(label, SandboxLimits(timeout_seconds=1),
                                  **{LABEL_PHASE: "agent"})
        labels["evalq.deadline"] = str(int(time.time() + seconds))
        made.append(client.containers.create(DEFAULT_IMAGE, ["sleep", "600"],
                                             network_mode="none", labels=labels))
    for container in made:
        container.start()
    try:
        assert janitor.sweep_once(get_agent_sandbox("docker")) >= 1
        ids = {c.id for c in client.containers.list(
            all=True, filters={"label": f"evalq.label={label}"}, ignore_removed=True)}
        assert made[0].id not in ids and made[1].id in ids
    finally:
        for c in client.containers.list(all=True, filters={"label": f"evalq.label={label}"},
                                        ignore_removed=True):
            c.remove(force=True)
        client.close()
