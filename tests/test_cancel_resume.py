"""`evalq cancel` stops a running embedded study with a clear state; `--resume` finishes it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time

from conftest import run_cli, start_cli, write_study


def test_cancel_then_resume(tmp_path, fixture_copies):
    home = tmp_path / "home"
    extra = {"EVALQ_HOME": str(home)}
    study = write_study(tmp_path / "study", fixture_copies, study_id="cancelme", repetitions=3,
                        pause=1)
    run = start_cli(["run", str(study), "--concurrency", "1"], extra, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
    db = home / "evalq.db"
    deadline = time.monotonic() + 120
    while True:
        if db.exists():
            try:
                with sqlite3.connect(db) as conn:
                    done = conn.execute("select count(*) from attempts "
                                        "where outcome is not null").fetchone()[0]
            except sqlite3.OperationalError:  # created, tables not yet there
                done = 0
            if done >= 1:
                break
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()
        time.sleep(0.1)
    proc = run_cli(["cancel", "cancelme"], extra)
    assert proc.returncode == 0, proc.stderr
    assert "cancelled" in proc.stdout
    out, err = run.communicate(timeout=120)
    assert run.returncode == 3, err
    assert "--resume" in err
    status = json.loads(run_cli(["status", "cancelme", "--json"], extra).stdout)
    counts = status if "planned" in status else status["counts"]
    assert counts["planned"] == 12
    with sqlite3.connect(db) as conn:
        rows = conn.execute("select state, outcome from attempts").fetchall()
    finished = [r for r in rows if r[1] is not None]
    assert 1 <= len(finished) < 12
    assert all(state in ("done", "cancelled") for state, _ in rows), rows
    assert not any(state == "running" for state, _ in rows)

    resumed = run_cli(["run", str(study), "--resume"], extra, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    with sqlite3.connect(db) as conn:
        per_trial = conn.execute("select trial_id, count(*), max(outcome) from attempts "
                                 "group by trial_id").fetchall()
    assert len(per_trial) == 12
    assert all(n == 1 and outcome for _, n, outcome in per_trial), per_trial
