"""Stopping the Docker engine during a study: its gradings become grading_failure, never
incorrect, and `evalq regrade` grades them from the stored workspaces once it is back.

The test runs a Docker engine of its own (own socket, data and exec roots), so the machine's
engine, which other tests use, is never stopped.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import run_cli, start_cli, write_study

IMAGE = "evalq-grader-python:local"


class PrivateEngine:
    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="eqd-", dir="/var/tmp"))
        self.socket = self.root / "d.sock"
        self.proc: subprocess.Popen | None = None

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    def _ping(self) -> bool:
        done = subprocess.run(["docker", "-H", self.host, "info", "--format", "{{.ID}}"],
                              capture_output=True, timeout=20)
        return done.returncode == 0

    def start(self) -> None:
        if shutil.which("dockerd") is None:
            pytest.fail("dockerd is not installed; run bash scripts/ensure-docker.sh",
                        pytrace=False)
        log = open(self.root / "dockerd.log", "ab")
        self.proc = subprocess.Popen(
            ["dockerd", "--iptables=false", "--bridge=none", "--ip-forward=false",
             "-H", self.host, "--data-root", str(self.root / "data"),
             "--exec-root", str(self.root / "x"), "--pidfile", str(self.root / "d.pid")],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 90
        while not self._ping():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.root / "dockerd.log").read_text()[-2000:]
                pytest.fail(f"private dockerd did not start:\n{tail}", pytrace=False)
            time.sleep(0.2)

    def load_image(self, image: str) -> None:
        save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "-H", self.host, "load", "-q"], stdin=save.stdout,
                              capture_output=True, timeout=300)
        save.wait()
        assert save.returncode == 0 and load.returncode == 0, load.stderr

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def remove(self) -> None:
        self.stop()
        subprocess.run(["umount", "-R", str(self.root / "data")], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def engine():
    machine = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True)
    if machine.returncode != 0:
        pytest.fail(f"{IMAGE} is missing; run bash scripts/ensure-docker.sh && "
                    "bash scripts/build-grader-images.sh", pytrace=False)
    private = PrivateEngine()
    try:
        private.start()
        private.load_image(IMAGE)
        yield private
    finally:
        private.remove()


def _outcomes(db: Path) -> list[tuple[str, str, int]]:
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("select trial_id, outcome, regrades from attempts "
                                "where outcome is not null order by trial_id").fetchall()
    except sqlite3.OperationalError:  # the file exists before its tables do
        return []


def test_engine_stopped_mid_study_then_regraded(tmp_path, fixture_copies, engine):
    home = tmp_path / "home"
    env_extra = {"EVALQ_HOME": str(home), "EVALQ_SANDBOX": "docker",
                 "DOCKER_HOST": engine.host}
    study = write_study(tmp_path / "study", fixture_copies, study_id="outage", repetitions=3,
                        pause=0.5)
    log = open(tmp_path / "run.log", "w")
    run = start_cli(["run", str(study), "--concurrency", "1"], env_extra, stdout=log,
                    stderr=subprocess.STDOUT)
    db = home / "evalq.db"
    deadline = time.monotonic() + 180
    while True:
        graded = [o for o in (_outcomes(db) if db.exists() else []) if o[1] != "grading_failure"]
        if len(graded) >= 2:
            break
        assert run.poll() is None, (tmp_path / "run.log").read_text()
        assert time.monotonic() < deadline, "no trial was graded in time"
        time.sleep(0.1)
    engine.stop()
    try:
        returncode = run.wait(300)
    finally:
        if run.poll() is None:  # a launcher that never ends must not outlive the test
            run.kill()
    assert returncode == 1, (tmp_path / "run.log").read_text()  # grading failures: exit 1
    during = _outcomes(db)
    assert len(during) == 12
    kinds = {o for _, o, _ in during}
    assert "grading_failure" in kinds, during
    for trial, outcome, _ in during:
        expected = "correct" if "/good/" in trial else "incorrect"
        assert outcome in (expected, "grading_failure"), (trial, outcome)
    failed = {t for t, o, _ in during if o == "grading_failure"}

    engine.start()
    reports = {fmt: home / "reports" / "outage" / f"report.{fmt}" for fmt in ("json", "md", "html")}
    for path in reports.values():
        path.unlink()
    proc = run_cli(["regrade", "outage"], env_extra, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    for path in reports.values():  # every format is rewritten from the regraded rows
        assert f"report: {path}" in proc.stdout and path.is_file(), proc.stdout
    regraded = json.loads(reports["json"].read_text())
    assert sum(c["outcomes"]["grading_failure"] for c in regraded["conditions"].values()) == 0
    markdown = reports["md"].read_text()
    for name, cond in regraded["conditions"].items():
        counts = " | ".join(str(n) for n in cond["outcomes"].values())
        assert f"| {name} | {counts} |" in markdown  # the Markdown says what the JSON says
    after = _outcomes(db)
    assert len(after) == 12, "regrading updates rows, it never adds any"
    for trial, outcome, regrades in after:
        expected = "correct" if "/good/" in trial else "incorrect"
        assert outcome == expected, (trial, outcome)
        assert regrades == (1 if trial in failed else 0)
