"""SIGTERM to an embedded `evalq run` stops every process it started (its local Celery workers,
their pool processes, the agents they run), so none of them lives on to run the next study
that uses the same home."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from conftest import run_cli, start_cli, write_study


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state letter) of every process now, from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended while we looked
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        found[int(entry.name)] = (int(fields[1]), fields[0])
    return found


def _descendants(root: int) -> set[int]:
    table = _processes()
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - found
        found |= frontier
    return found


def _alive(pids: set[int]) -> set[int]:
    table = _processes()
    return {pid for pid in pids if pid in table and table[pid][1] not in ("Z", "X")}


def _until(condition, seconds: float, what: str, proc: subprocess.Popen | None = None):
    """Poll `condition` until it returns something true; fail naming `what` at the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"evalq run exited ({proc.returncode}) before {what}: "
                                 f"{proc.communicate()}")
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.1)


def _running(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("select count(*) from attempts where state = 'running'"
                                ).fetchone()[0]
    except sqlite3.OperationalError:  # tables not created yet
        return 0


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_sigterm_stops_the_local_workers_and_they_run_no_later_study(tmp_path, fixture_copies,
                                                                        how):
    """SIGTERM to `evalq run`, or Ctrl-C (SIGINT to its whole foreground process group, as a
    terminal sends it)."""
    home = tmp_path / "home"
    env = {"EVALQ_HOME": str(home)}
    slow = write_study(tmp_path / "slow", fixture_copies, study_id="slow", repetitions=2,
                       pause=60, wall=300)
    run = start_cli(["run", str(slow), "--concurrency", "2"], env, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, start_new_session=(how == "ctrl-c"))
    try:
        _until(lambda: _running(home / "evalq.db") >= 1, 180, "a trial is running", run)
        # the worker, its two pool processes and the running agent's sandbox at least
        started = _until(lambda: (lambda tree: tree if len(tree) >= 4 else None)(
            _descendants(run.pid)), 60, "the worker, its pool and an agent are up", run)
        if how == "sigterm":
            run.send_signal(signal.SIGTERM)
        else:
            os.killpg(run.pid, signal.SIGINT)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    if how == "sigterm":
        assert run.returncode == 128 + signal.SIGTERM, (run.returncode, err)
        assert "SIGTERM" in err and "--resume" in err, err
    else:
        assert run.returncode != 0, (run.returncode, err)
    _until(lambda: not _alive(started), 30,
           f"every process evalq run started is gone (left: {_alive(started)})")

    with sqlite3.connect(home / "evalq.db") as conn:
        interrupted = conn.execute("select count(*) from attempts where study_id = 'slow' "
                                   "and outcome is null").fetchone()[0]
    assert interrupted >= 1, "the interrupted trials stay pending for --resume"

    quick = write_study(tmp_path / "quick", fixture_copies, study_id="quick", repetitions=1)
    later = run_cli(["run", str(quick), "--concurrency", "1"], env, timeout=300)
    assert later.returncode == 0, later.stderr
    with sqlite3.connect(home / "evalq.db") as conn:
        owners = [r[0] for r in conn.execute(
            "select lease_owner from attempts where study_id = 'quick'")]
    assert len(owners) == 4 and all(owners), owners
    # the grader's lease owner, last to hold each attempt: grader:NODE:PID:NONCE, where an
    # embedded worker's node name carries the pid of the `evalq run` that started it
    assert all(o.startswith("grader:embedded") for o in owners), owners
    assert not any(f"-{run.pid}@" in o for o in owners), owners
    ran_in = {int(owner.split(":")[-2]) for owner in owners}
    assert not ran_in & started, f"the later study ran in a process of the first run: {ran_in}"
