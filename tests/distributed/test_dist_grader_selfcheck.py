"""A grading worker checks itself on each fixture before grading its trials, and refuses a
fixture it gets wrong until it is fixed.

Everything is real: the machine's Redis and PostgreSQL, `evalq worker` processes, bubblewrap
or Docker gradings. The fault is the one that once graded 20 of 20 correct solutions
`incorrect` unnoticed, in a form either backend has: the grading toolchain of one fixture is
replaced by one in which its hidden tests cannot run (pytest removed from the rootfs tree, or
from an image made from the real one). The other fixture grades in the real toolchain.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from conftest import EVALQ, write_study
from dist_support import Procs, evalq_env, status_json, wait_for
from evalq.fixtures.fixture import freeze_fixture
from evalq.graders.sandbox.toolchain import DEFAULT_CACHE

LEASE = 4.0
FAULTY = "py-slugify-bugfix"
HEALTHY = "py-inventory-feature"
PYTEST_PARTS = ("usr/lib/python3/dist-packages/pytest", "usr/lib/python3/dist-packages/_pytest",
                "usr/bin/pytest", "usr/bin/pytest-3")
REAL_ROOTFS = Path(DEFAULT_CACHE) / "rootfs"


class FaultyToolchain:
    """The toolchain `image` names, broken (no pytest) or fixed (the real python one), for
    bubblewrap (a rootfs tree in the grader's own EVALQ_GRADER_CACHE) or Docker (an image)."""

    def __init__(self, backend: str):
        self.backend = backend
        # bubblewrap reaches the tree as the sandbox user: not under pytest's private tmp dirs
        self.cache = Path(tempfile.mkdtemp(prefix="evalq-test-grader-cache-"))
        self.cache.chmod(0o755)
        self.name = f"scfault{uuid.uuid4().hex[:8]}"
        self.image = f"evalq-grader-{self.name}:local"
        self.made: list[str] = []  # Docker images this test created, by id

    def setup(self) -> None:
        rootfs = self.cache / "rootfs"
        rootfs.mkdir()
        (rootfs / "python").symlink_to(REAL_ROOTFS / "python")
        shutil.copy(REAL_ROOTFS / "python.digest", rootfs / "python.digest")
        if self.backend == "bwrap":
            tree = rootfs / self.name
            # hard links: removing a name from the copy leaves the real tree as it is
            done = subprocess.run(["cp", "-al", str(REAL_ROOTFS / "python"), str(tree)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                shutil.rmtree(tree, ignore_errors=True)
                shutil.copytree(REAL_ROOTFS / "python", tree, symlinks=True)
            for part in PYTEST_PARTS:
                path = tree / part
                shutil.rmtree(path) if path.is_dir() else path.unlink()
            (rootfs / f"{self.name}.digest").write_text(
                "sha256:" + uuid.uuid4().hex + uuid.uuid4().hex + "\n")
            return
        container = f"evalq-test-{self.name}"
        try:
            _docker("run", "--name", container, "--user", "0", "evalq-grader-python:local",
                    "rm", "-rf", *[f"/{p}" for p in PYTEST_PARTS])
            self.made.append(_docker("commit", container, self.image).strip())
        finally:
            subprocess.run(["docker", "rm", "-f", container], capture_output=True)

    def fix(self) -> None:
        if self.backend == "bwrap":
            rootfs = self.cache / "rootfs"
            shutil.rmtree(rootfs / self.name)
            (rootfs / self.name).symlink_to(REAL_ROOTFS / "python")
            shutil.copy(REAL_ROOTFS / "python.digest", rootfs / f"{self.name}.digest")
        else:
            _docker("tag", "evalq-grader-python:local", self.image)

    def cleanup(self) -> None:
        shutil.rmtree(self.cache, ignore_errors=True)  # links are removed, not followed
        if self.backend == "docker":
            subprocess.run(["docker", "rmi", self.image], capture_output=True)
            for image_id in self.made:
                subprocess.run(["docker", "rmi", image_id], capture_output=True)


def _docker(*args: str) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"docker {' '.join(args)}: {done.stderr}"
    return done.stdout


def _require_docker() -> None:
    done = subprocess.run(["docker", "image", "inspect", "evalq-grader-python:local"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail("the Docker engine or the image evalq-grader-python:local is missing; "
                    "run `make docker` (see README, Docker here)", pytrace=False)


def _rows(db_url: str) -> list[dict]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(text(
                "select a.trial_id, a.attempt, a.state, a.outcome, a.lease_owner, t.fixture_id, "
                "t.condition from attempts a join trials t on t.id = a.trial_id")).mappings()]
    finally:
        engine.dispose()


def _checks(db_url: str) -> list[dict]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(text("select * from grader_checks"))
                    .mappings()]
    finally:
        engine.dispose()


def _self_checks(log: str, fixture: str) -> list[str]:
    """The pids of the processes that graded `fixture`'s references, once per check."""
    return re.findall(rf"self-check of fixture {re.escape(fixture)} in process (\d+) ", log)


class FailedTasks:
    """The task-failed events the workers send (what Flower shows), captured from the broker."""

    def __init__(self, broker_url: str):
        from celery import Celery

        self.events: list[dict] = []
        self.ready = threading.Event()
        self.app = Celery(broker=broker_url)
        self.receiver = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(30), "the event receiver did not start"

    def _run(self) -> None:
        with self.app.connection() as conn:
            self.receiver = self.app.events.Receiver(
                conn, handlers={"task-failed": self.events.append})
            self.receiver.on_iteration = self.ready.set  # subscribed: events reach it now
            self.receiver.capture(limit=None, timeout=None, wakeup=False)

    def close(self) -> None:
        if self.receiver is not None:
            self.receiver.should_stop = True
        self.thread.join(10)


def _env(tmp_path, redis_url, postgres_url, **extra) -> dict[str, str]:
    return evalq_env({"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_BROKER_URL": redis_url,
                      "EVALQ_DATABASE_URL": postgres_url,
                      "EVALQ_ARTIFACTS_URL": str(tmp_path / "artifacts"),
                      "EVALQ_LEASE_SECONDS": str(LEASE), **extra})


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_a_healthy_grader_checks_each_fixture_once_and_grades(tmp_path, fixture_copies,
                                                              redis_url, postgres_url, backend):
    if backend == "docker":
        _require_docker()
    env = _env(tmp_path, redis_url, postgres_url)
    study = write_study(tmp_path / "study", fixture_copies, study_id="healthy", repetitions=2)
    procs = Procs(tmp_path)
    try:
        procs.worker("agents", "host-a", "agents", env, concurrency=2)
        # one pool process: every trial of a fixture passes through the same cache
        procs.worker("grader", "host-g", "grading", dict(env, EVALQ_SANDBOX=backend))
        procs.worker("results", "host-r", "results", env)
        run = procs.start("launcher", [*EVALQ, "run", str(study), "--no-wait"], env)
        assert run.wait(120) == 0, procs.logs()
        final = wait_for(lambda: (s := status_json(env, "healthy"))["finished"] == 8 and s, 240,
                         "every trial to finish")
    finally:
        procs.stop_all()
    assert final["by_outcome"]["correct"] == 4 and final["by_outcome"]["incorrect"] == 4, final
    assert final["grader_refusals"] == []
    log = procs.log("grader")
    for fixture in (FAULTY, HEALTHY):  # four trials each, one self-check each
        assert len(_self_checks(log, fixture)) == 1, log[-4000:]
    assert log.count("grading its references") == 2, log[-4000:]
    checks = _checks(postgres_url)
    assert {(c["fixture_id"], c["grader"], c["ok"], c["sandbox"]) for c in checks} == {
        (FAULTY, "grader@host-g", True, backend), (HEALTHY, "grader@host-g", True, backend)}
    # the check graded exactly the pair of references, each as it must come out
    assert all(c["verdicts"] == {"correct": "correct", "incorrect": "incorrect"}
               for c in checks), checks
    assert all(c["toolchain"] and c["toolchain"].startswith("sha256:") for c in checks), checks
    assert len(_rows(postgres_url)) == 8


def _grade_in(fixture_copies, toolchain):
    """The faulty fixture set to grade in `toolchain`'s image, frozen again."""
    manifest = fixture_copies / FAULTY / "fixture.toml"
    manifest.write_text(manifest.read_text().replace('image = "evalq-grader-python:local"',
                                                     f'image = "{toolchain.image}"'))
    return freeze_fixture(fixture_copies / FAULTY)


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_a_grader_with_a_broken_toolchain_refuses_the_fixture_until_fixed(
        tmp_path, fixture_copies, redis_url, postgres_url, backend):
    if backend == "docker":
        _require_docker()
    toolchain = FaultyToolchain(backend)
    _grade_in(fixture_copies, toolchain)
    env = _env(tmp_path, redis_url, postgres_url)
    grader_env = dict(env, EVALQ_SANDBOX=backend, EVALQ_GRADER_CACHE=str(toolchain.cache))
    study = write_study(tmp_path / "study", fixture_copies, study_id="refuse", repetitions=2)
    procs = Procs(tmp_path)
    failed = FailedTasks(redis_url)
    try:
        toolchain.setup()
        procs.worker("agents", "host-a", "agents", env, concurrency=2)
        procs.worker("grader", "host-g", "grading", grader_env)
        procs.worker("results", "host-r", "results", env)
        run = procs.start("launcher", [*EVALQ, "run", str(study), "--no-wait"], env)
        assert run.wait(120) == 0, procs.logs()
        faulty = [f"refuse/{FAULTY}/{c}/r{r}" for c in ("good", "bad") for r in (1, 2)]

        first_seen: list[float] = []

        def refused_twice():  # every faulty trial refused, one of them again after a re-send
            log = procs.log("grader")
            counts = [log.count(f"not grading {t}#1, which stays pending") for t in faulty]
            if max(counts) and not first_seen:
                first_seen.append(time.monotonic())
            healthy_done = [r for r in _rows(postgres_url)
                            if r["fixture_id"] == HEALTHY and r["outcome"]]
            return min(counts) >= 1 and max(counts) >= 2 and len(healthy_done) == 4

        wait_for(refused_twice, 240, "the faulty fixture's trials to be refused, and re-sent")
        rows = _rows(postgres_url)
        # the same grader grades the other fixture; the faulty one's trials get no outcome
        assert sorted(r["outcome"] for r in rows if r["fixture_id"] == HEALTHY) == \
            ["correct", "correct", "incorrect", "incorrect"], rows
        assert [r for r in rows if r["fixture_id"] == FAULTY and
                (r["outcome"] is not None or r["state"] != "grading")] == [], rows
        assert len(rows) == 8 and {r["attempt"] for r in rows} == {1}, rows

        status = status_json(env, "refuse")
        assert status["finished"] == 4 and status["by_state"]["grading"] == 4, status
        (refusal,) = status["grader_refusals"]
        assert (refusal["grader"], refusal["fixture_id"], refusal["ok"]) == \
            ("grader@host-g", FAULTY, False), refusal
        assert refusal["reason"].startswith("correct reference graded "), refusal
        shown = subprocess.run([*EVALQ, "status", "refuse"], env=env, capture_output=True,
                               text=True, timeout=60)
        line = f"grader grader@host-g refuses fixture {FAULTY}: correct reference graded"
        assert line in shown.stdout, shown.stdout

        # Flower's view: the grading task failed, the refusal as its exception
        wait_for(lambda: any(line in e.get("exception", "") for e in failed.events), 30,
                 "a task-failed event with the refusal")

        # no hot loop: a refused trial comes back about once a lease (and the fixture is
        # checked again at most that often), not at once
        log = procs.log("grader")
        leases = (time.monotonic() - first_seen[0]) / LEASE
        per_trial = max(log.count(f"not grading {t}#1, which stays pending") for t in faulty)
        assert per_trial <= leases + 2, (per_trial, leases)
        assert len(_self_checks(log, FAULTY)) <= leases + 2, (log[-4000:], leases)

        toolchain.fix()
        final = wait_for(lambda: (s := status_json(env, "refuse"))["finished"] == 8 and s, 240,
                         "the refused trials to be graded once the toolchain is fixed")
        assert final["by_outcome"]["correct"] == 4 and final["by_outcome"]["incorrect"] == 4, \
            final
        assert final["grader_refusals"] == [], final
        rows = _rows(postgres_url)
        assert len(rows) == 8 and {r["attempt"] for r in rows} == {1}, rows
        log = procs.log("grader")
        # one check of the healthy fixture; the faulty one passes once its toolchain is fixed
        assert len(_self_checks(log, HEALTHY)) == 1, log[-4000:]
        assert log.count(f"self-check of fixture {FAULTY} passed") == 1, log[-4000:]
    finally:
        failed.close()
        procs.stop_all()
        toolchain.cleanup()


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_the_gate_checks_once_per_toolchain_and_retries_a_failure_only_when_due(
        fixture_copies, monkeypatch, caplog, backend):
    """In one process: a failed check is cached (a burst of trials costs one check) until
    `retry_after` has passed; a fixed toolchain is a new key, checked at once, then cached."""
    from evalq.graders.sandbox import get_sandbox
    from evalq.graders.selfcheck import GraderRefused, SelfCheckGate

    if backend == "docker":
        _require_docker()
    toolchain = FaultyToolchain(backend)
    fixture = _grade_in(fixture_copies, toolchain)
    monkeypatch.setenv("EVALQ_GRADER_CACHE", str(toolchain.cache))
    gate, rows = SelfCheckGate(), []
    caplog.set_level("INFO", logger="evalq.grading")

    def checks() -> int:
        return sum("grading its references" in r.getMessage() for r in caplog.records)

    try:
        toolchain.setup()
        backend_ = get_sandbox(backend)
        for _ in range(3):
            with pytest.raises(GraderRefused, match=f"grader g@h refuses fixture {FAULTY}: "
                                                    "correct reference graded "):
                gate.require(fixture, backend_, "g@h", 3600, rows.append)
        assert checks() == 1 and [r["ok"] for r in rows] == [False]
        with pytest.raises(GraderRefused):
            gate.require(fixture, backend_, "g@h", 0, rows.append)  # due: checked again
        assert checks() == 2
        toolchain.fix()
        for _ in range(3):
            verdict = gate.require(fixture, backend_, "g@h", 3600, rows.append)
        assert verdict.ok and verdict.verdicts == {"correct": "correct", "incorrect": "incorrect"}
        assert checks() == 3 and [r["ok"] for r in rows] == [False, False, True]
        assert rows[0]["toolchain"] != rows[-1]["toolchain"]
    finally:
        toolchain.cleanup()


def test_a_pass_noted_by_an_earlier_worker_with_a_reused_pid_is_not_taken(monkeypatch):
    """Pids are reused (pid_max is often 32768): a pass noted under a worker that has since
    died must not spare a new worker that happens to get the same pid its self-check."""
    from evalq.graders import selfcheck

    key = ("sha256:fixture", "bwrap", "sha256:toolchain")
    monkeypatch.setattr(selfcheck, "process_start", lambda pid: "111")
    earlier = selfcheck._pass_mark(key)
    monkeypatch.setattr(selfcheck, "process_start", lambda pid: "222")
    later = selfcheck._pass_mark(key)
    assert earlier != later
    assert selfcheck._pass_mark(key) == later  # the same worker finds its own pass again
