"""Gradings hold a lease: a grader SIGKILLed mid-grade is re-graded within two leases, with or
without a launcher, while other trials keep finishing; a Redis restart mid-grade loses no result
with no launcher running, and workers reconnect without Celery's gossip error.

Everything is real: the study's own Redis (restarted), PostgreSQL, bubblewrap gradings. One
fixture's hidden tests take a few seconds (a conftest that sleeps), so "mid-grade" is a window
the test can act in; which grader holds a grading is read from the lease in the database.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest
from sqlalchemy import create_engine, text

from conftest import EVALQ
from dist_support import (Procs, RedisServer, condition, evalq_env, free_port, status_json,
                          wait_for, write_big_study)
from evalq.fixtures.fixture import freeze_fixture

LEASE = 4.0
GRADE_SECONDS = 3


def _slow_grading(fixture) -> None:
    """The fixture's hidden tests pause GRADE_SECONDS before running (re-frozen afterwards)."""
    conftest = fixture / "hidden" / "hidden_tests" / "conftest.py"
    before = conftest.read_text() if conftest.exists() else ""
    conftest.write_text(before + f"\nimport time\ntime.sleep({GRADE_SECONDS})\n")
    freeze_fixture(fixture)


def _gradings(db_url: str) -> list[dict]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(text(
                "select trial_id, attempt, state, outcome, lease_owner, lease_expires_at "
                "from attempts"))
                .mappings()]
    finally:
        engine.dispose()


def _held_by_grader(db_url: str) -> list[dict]:
    return [r for r in _gradings(db_url) if r["state"] == "grading" and r["outcome"] is None
            and (r["lease_owner"] or "").startswith("grader:")]


def _unclaimed(db_url: str) -> list[dict]:
    """Gradings the agent handed off that no grader has claimed (no lease yet)."""
    return [r for r in _gradings(db_url) if r["state"] == "grading" and r["outcome"] is None
            and r["lease_expires_at"] is None]


def _setup(tmp_path, fixture_copies, postgres_url, study_id: str, repetitions: int):
    _slow_grading(fixture_copies / "py-slugify-bugfix")
    redis_server = RedisServer(free_port(), tmp_path).start()
    env = evalq_env({"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_BROKER_URL": redis_server.url,
                     "EVALQ_DATABASE_URL": postgres_url,
                     "EVALQ_ARTIFACTS_URL": str(tmp_path / "artifacts"),
                     "EVALQ_LEASE_SECONDS": str(LEASE)})
    study = write_big_study(tmp_path / "study", fixture_copies, study_id,
                            condition("good", '{ action = "solution", solution = "correct", '
                                              'seconds = 0.5 }'), repetitions)
    return redis_server, env, study


@pytest.mark.parametrize("launcher", [True, False], ids=["launcher", "no-launcher"])
def test_killed_grader_is_regraded_within_two_leases(tmp_path, fixture_copies, postgres_url,
                                                     launcher):
    redis_server, env, study = _setup(tmp_path, fixture_copies, postgres_url, "lease", 3)
    procs = Procs(tmp_path)
    try:
        procs.worker("agents", "host-a", "agents", env, concurrency=2)
        # six slots each: the survivor always has one free for the re-sent grading, even
        # while its processes check themselves on a fixture first (graders/selfcheck.py)
        procs.worker("grader-a", "host-g1", "grading", env, concurrency=6)
        procs.worker("grader-b", "host-g2", "grading", env, concurrency=6)
        procs.worker("results", "host-r", "results", env)
        run = procs.start("launcher", [*EVALQ, "run", str(study),
                                       *([] if launcher else ["--no-wait"])], env)
        if not launcher:
            assert run.wait(120) == 0, procs.logs()
            assert "evalq status lease --watch" in procs.log("launcher")

        # a delivered message the victim had not claimed yet is re-sent by the sweep too
        # (test_grading_taken_by_a_grader_that_died_before_claiming_it)
        held = wait_for(lambda: _held_by_grader(postgres_url), 120, "a grader to hold a grading")
        victim = held[0]
        name = victim["lease_owner"].split(":")[1].split("@")[0]
        os.killpg(procs.procs[name].pid, signal.SIGKILL)
        killed_at = time.monotonic()
        key = (victim["trial_id"], victim["attempt"])

        def taken_again():
            row = next(r for r in _gradings(postgres_url) if (r["trial_id"], r["attempt"]) == key)
            return row["outcome"] is not None or (
                (row["lease_owner"] or "").startswith("grader:")
                and row["lease_owner"] != victim["lease_owner"])

        wait_for(taken_again, 60, f"another grader to take {key}", every=0.1)
        regraded_after = time.monotonic() - killed_at
        assert regraded_after <= 2 * LEASE, (regraded_after, procs.logs())

        final = wait_for(lambda: (s := status_json(env, "lease"))["finished"] == 6 and s, 120,
                         "every trial to finish")
        assert final["by_outcome"]["correct"] == 6, final
        rows = _gradings(postgres_url)
        assert len(rows) == 6 and {r["attempt"] for r in rows} == {1}
        if launcher:
            assert run.wait(60) == 0, procs.logs()
        survivor = "grader-b" if name == "grader-a" else "grader-a"
        assert f"{victim['trial_id']}#{victim['attempt']}" in procs.log(survivor) + \
            procs.log("results") + procs.log("launcher"), "the re-send names the trial"
    finally:
        procs.stop_all()
        redis_server.stop()


def test_redis_restart_mid_grade_loses_no_result(tmp_path, fixture_copies, postgres_url):
    redis_server, env, study = _setup(tmp_path, fixture_copies, postgres_url, "restart", 1)
    procs = Procs(tmp_path)
    try:
        procs.worker("agents", "host-a", "agents", env, concurrency=2)
        procs.worker("grader", "host-g", "grading", env, concurrency=2)
        procs.worker("results", "host-r", "results", env)
        run = procs.start("launcher", [*EVALQ, "run", str(study), "--no-wait"], env)
        assert run.wait(120) == 0, procs.logs()
        # the slow fixture's grading is under way (the other trial done) when Redis goes away
        slow = "restart/py-slugify-bugfix/good/r1"

        def slow_grading_only():
            rows = _gradings(postgres_url)
            return any(r["trial_id"] == slow for r in _held_by_grader(postgres_url)) and \
                any(r["trial_id"] != slow and r["outcome"] for r in rows)

        wait_for(slow_grading_only, 120, "the slow grading, with the other trial finished")
        redis_server.stop()
        # the grade ends, and its result is sent, while Redis is down
        wait_for(lambda: f"graded {slow}#1" in procs.log("grader"), 60, "the grade to end")
        redis_server.start()  # empty: no persistence, every queued message is gone

        final = wait_for(lambda: (s := status_json(env, "restart"))["finished"] == 2 and s, 150,
                         "both results after the restart")
        assert final["by_outcome"]["correct"] == 2, final
        logs = procs.log("grader") + procs.log("results") + procs.log("agents")
        assert "Error on restarting" not in logs, logs[-3000:]
        assert "Connected to redis" in procs.log("results")
    finally:
        procs.stop_all()
        redis_server.stop()


#: takes one grading message off the queue as a Celery consumer does (filed as unacknowledged,
#: with its delivery time) and dies before anything else: a grader SIGKILLed between delivery
#: and its claim
_TAKE_AND_DIE = """
import os, signal, sys
from kombu import Connection
with Connection(sys.argv[1]) as conn:
    message = conn.default_channel.basic_get("grading", no_ack=False)
    print("took", message is not None, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_grading_taken_by_a_grader_that_died_before_claiming_it(tmp_path, fixture_copies,
                                                               postgres_url):
    """Delivered, never claimed, its taker dead: re-sent within two leases of a live grader
    coming up, while the broker would hand it back only after its hour-long visibility
    timeout."""
    redis_server, env, study = _setup(tmp_path, fixture_copies, postgres_url, "held", 1)
    env["EVALQ_VISIBILITY_TIMEOUT"] = "3600"
    procs = Procs(tmp_path)
    try:
        procs.worker("agents", "host-a", "agents", env, concurrency=2)
        procs.worker("results", "host-r", "results", env)
        assert procs.start("launcher", [*EVALQ, "run", str(study), "--no-wait"],
                           env).wait(120) == 0, procs.logs()
        wait_for(lambda: len(_unclaimed(postgres_url)) == 2, 120,
                 "both trials to wait for grading, unclaimed")
        taker = procs.start("dead-grader", [sys.executable, "-c", _TAKE_AND_DIE,
                                            redis_server.url], env)
        assert taker.wait(60) == -signal.SIGKILL and "took True" in procs.log("dead-grader"), \
            procs.log("dead-grader")
        procs.worker("grader", "host-g", "grading", env, concurrency=2)
        # within two minutes, where the broker would hand the message back after an hour
        final = wait_for(lambda: (s := status_json(env, "held"))["finished"] == 2 and s, 120,
                         "both gradings, the one the dead grader took included")
        assert final["by_outcome"]["correct"] == 2, final
        assert "re-sent 1 grading(s)" in procs.log("grader") + procs.log("results"), \
            procs.logs()
    finally:
        procs.stop_all()
        redis_server.stop()
