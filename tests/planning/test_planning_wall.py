"""Wall-time forecasts from the pilot's phases (queue wait, agent, grading), checked by hand,
and against a real embedded run whose report says how far off the forecast was."""

from __future__ import annotations

import json
import sqlite3

import pytest
from sqlalchemy import update

from evalq.planning import forecast, forecast_lines, load_pilot, run_distributions
from evalq.results.store import AttemptRow

from planning_pilots import insert_pilot, manifest
from test_planning_cli import cli

WAITS, AGENT, GRADING = (3.0, 5.0, 7.0, 9.0), (10.0, 20.0, 30.0, 40.0), (2.0, 4.0, 6.0, 8.0)


def phased_pilot(db):
    """Four runs with known queue waits, agent times and grading times, in a real database."""
    cells = [("a", "base", "incorrect"), ("a", "cand", "correct"),
             ("b", "base", "correct"), ("b", "cand", "correct")]
    runs = [{"task": t, "condition": c,
             "attempts": [{"outcome": o, "cost": 0.1, "start": 1000.0, "end": 1000.0 + agent}]}
            for (t, c, o), agent in zip(cells, AGENT)]
    engine = insert_pilot(db, "pilot", runs)
    for i, (wait, agent, grading) in enumerate(zip(WAITS, AGENT, GRADING)):
        with engine.begin() as conn:
            conn.execute(update(AttemptRow).where(AttemptRow.trial_id == f"pilot-{i}").values(
                enqueued_at=1000.0 - wait, graded_at=1000.0 + agent + grading))
    return engine


def test_wall_forecast_equals_a_hand_computation_from_the_phases(tmp_path):
    engine = phased_pilot(tmp_path / "db.sqlite")
    fc = forecast(run_distributions(load_pilot(engine, "pilot")), trials=10, workers=3)
    wall = fc["wall_seconds"]
    assert ("  per run, pilot medians: agent + grading 30.0 s (agent alone 25.0 s, grading "
            "alone 5.0 s); start-up 3.0 s (the shortest queue wait)") in forecast_lines(fc)
    # a run holds a slot for agent + grading: 12 24 36 48 -> median 30, p90 (linear, position
    # 2.7) 36 + 0.7 * 12 = 44.4; start-up is the shortest queue wait, 3; 10 runs on 3 slots
    # are 4 waves
    assert wall["available"] and wall["reason"] is None and wall["note"] is None
    assert wall["method"] == "start-up + waves × (agent + grading)"
    assert wall["waves"] == 4 and wall["startup_seconds"] == 3.0
    assert wall["per_run"]["median"] == pytest.approx(30.0)
    assert wall["at_median"] == pytest.approx(3.0 + 4 * 30.0)
    assert wall["at_p90"] == pytest.approx(3.0 + 4 * 44.4)
    phases = wall["phases"]
    assert phases["queue_wait"]["median"] == pytest.approx(6.0)
    assert phases["agent"]["median"] == pytest.approx(25.0)
    assert phases["grading"]["median"] == pytest.approx(5.0)


def test_a_pilot_without_grading_times_falls_back_and_says_it_is_low(tmp_path):
    runs = [{"task": t, "condition": c,
             "attempts": [{"outcome": "correct", "cost": 0.1, "start": 1000.0, "end": 1010.0}]}
            for t in "ab" for c in ("base", "cand")]
    engine = insert_pilot(tmp_path / "db.sqlite", "pilot", runs)
    wall = forecast(run_distributions(load_pilot(engine, "pilot")), trials=4,
                    workers=2)["wall_seconds"]
    assert wall["method"] == "waves × agent time"
    assert wall["at_median"] == pytest.approx(20.0)
    assert "grading and start-up left out" in wall["note"] and "likely low" in wall["note"]


def test_a_real_run_reports_its_forecast_and_how_far_off_it_was(tmp_path, fixture_copies):
    home = {"EVALQ_HOME": str(tmp_path / "home")}
    pilot = manifest(tmp_path / "pilot", fixture_copies, "pilot", repetitions=1)
    assert cli(["run", str(pilot)], home).returncode == 0
    main = manifest(tmp_path / "main", fixture_copies, "main", repetitions=2)
    planned = cli(["plan", str(main), "--pilot", "pilot", "--workers", "2", "--simulations",
                   "100", "--tasks", "2", "--repetitions", "2", "--min-tasks", "1",
                   "--min-repetitions", "1", "--write-lock", "--json"], home)
    assert planned.returncode == 0, planned.stderr
    ran = cli(["run", str(main), "--concurrency", "2"], home)
    assert ran.returncode == 0, ran.stderr
    report = json.loads((tmp_path / "home" / "reports" / "main" / "report.json").read_text())
    block = report["wall_time"]

    # the forecast recorded at launch is the plan's distributions on the run's 2 slots for
    # its 8 trials, recomputed here from the lock
    lock = json.loads(main.with_name("main.lock.json").read_text())
    dists = lock["planning"]["run_distributions"]
    slot, startup = dists["slot_seconds"], dists["startup_seconds"]
    assert slot["runs_with_value"] == 4 and startup is not None and startup > 0
    assert block["workers"] == 2 and block["trials_forecast"] == 8
    assert block["forecast_method"] == "start-up + waves × (agent + grading)"
    assert block["forecast_seconds"] == pytest.approx(startup + 4 * slot["median"])
    assert block["forecast_p90_seconds"] == pytest.approx(startup + 4 * slot["p90"])

    # the actual wall time, read from the attempts independently
    with sqlite3.connect(tmp_path / "home" / "evalq.db") as conn:
        first, last = conn.execute("select min(enqueued_at), max(finished_at) from attempts "
                                   "where study_id = 'main' and attempt = 1").fetchone()
    assert block["actual_seconds"] == pytest.approx(last - first)
    assert block["ratio"] == pytest.approx((last - first) / block["forecast_seconds"])
    assert block["error_seconds"] == pytest.approx((last - first) - block["forecast_seconds"])
    assert block["within_p90"] is ((last - first) <= block["forecast_p90_seconds"])
    md = (tmp_path / "home" / "reports" / "main" / "report.md").read_text()
    line = next(l for l in md.splitlines() if l.startswith("- wall time: "))
    assert "forecast" in line and "actual" in line and f"{block['ratio']:.2f}×" in line
