"""Many in-flight trials in one agent worker process (the threads pool), and losing it whole.

One threads-pool worker holds every trial of a small study at once; it is SIGKILLed with all of
them in flight, a new worker takes over, and every trial ends with exactly one recorded outcome.
The leases of one process are renewed by one thread in one UPDATE (results/lease.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest
from sqlalchemy import create_engine, text

from conftest import EVALQ
from dist_support import (Procs, assert_adds_up, attempts_table, condition, evalq_env,
                          status_json, wait_for, write_big_study)
from evalq.results.lease import Heartbeat, renew_many
from evalq.results.store import (StudyRow, TrialRow, claim, create_attempts, init_db,
                                 record_attempt, save_study)

TRIALS = 30  # 2 fixtures x 15 repetitions


def _seed(engine, count: int) -> list[str]:
    study = StudyRow(id="s", manifest={"conditions": []}, lock={}, lock_digest="sha256:x")
    trials = [TrialRow(id=f"s/f/c/r{i}", study_id="s", fixture_id="f", fixture_digest="d",
                       fixture_ref="r", condition="c", repetition=i, block=0, order_index=i)
              for i in range(count)]
    save_study(engine, study, trials)
    create_attempts(engine, [t.id for t in trials], {t.id: 1 for t in trials}, "s")
    return [t.id for t in trials]


def _expiries(engine) -> dict[str, float]:
    with engine.connect() as conn:
        return dict(conn.execute(text("select trial_id, lease_expires_at from attempts")).all())


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    if request.param == "sqlite":
        yield init_db(f"sqlite:///{tmp_path / 'r.db'}")
    else:
        yield init_db(request.getfixturevalue("postgres_url"))


def test_renew_many_extends_only_the_leases_still_held(engine):
    ids = _seed(engine, 5)
    for i, trial_id in enumerate(ids):
        assert claim(engine, trial_id, 1, f"w{i}", 30, max_claims=3)[0]
    record_attempt(engine, {"study_id": "s", "trial_id": ids[4], "attempt": 1,
                            "outcome": "correct"})  # finished: no longer renewable
    before = _expiries(engine)
    keys = [(ids[0], 1, "w0"), (ids[1], 1, "w1"), (ids[2], 1, "someone-else"),
            (ids[4], 1, "w4")]
    assert renew_many(engine, keys, 600) == {(ids[0], 1), (ids[1], 1)}
    after = _expiries(engine)
    assert after[ids[0]] > before[ids[0]] + 500 and after[ids[1]] > before[ids[1]] + 500
    assert after[ids[2]] == before[ids[2]] and after[ids[3]] == before[ids[3]]


def test_one_thread_renews_every_lease_of_the_process_and_flags_a_lost_one(engine):
    ids = _seed(engine, 40)
    lease = 0.9
    beats = []
    for i, trial_id in enumerate(ids):
        assert claim(engine, trial_id, 1, f"w{i}", lease, max_claims=3)[0]
        beats.append(Heartbeat(engine, {"trial_id": trial_id, "attempt": 1}, f"w{i}", lease))
    for beat in beats:
        beat.start()
    try:
        renewers = [t for t in threading.enumerate() if t.name == "evalq-lease"]
        assert len(renewers) == 1
        # another worker takes trial 0 (as after an expiry): its heartbeat must notice
        with engine.begin() as conn:
            conn.execute(text("update attempts set lease_owner = 'thief' where trial_id = :t"),
                         {"t": ids[0]})
        wait_for(lambda: beats[0].lost, 10, "the heartbeat of the taken lease to say lost",
                 every=0.05)
        # three lease lengths later every other lease is still live: renewed, not expired
        end = time.monotonic() + 3 * lease
        while time.monotonic() < end:
            now = time.time()
            live = _expiries(engine)
            assert all(live[t] > now for t in ids[1:]), "a held lease expired"
            time.sleep(0.1)
        assert not any(beat.lost for beat in beats[1:])
    finally:
        for beat in beats:
            beat.stop()


def test_many_trial_threads_ask_the_database_about_cancellation_once(engine):
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy import event

    from evalq.workers.runner import _CancelWatch

    _seed(engine, 1)
    asked = []
    listener = lambda *args: asked.append(args[2]) if "studies" in args[2] else None  # noqa
    event.listen(engine, "before_cursor_execute", listener)
    try:
        watch = _CancelWatch(every=600)
        with ThreadPoolExecutor(50) as pool:
            answers = list(pool.map(lambda _: watch.cancelled(engine, "s"), range(200)))
        assert answers == [False] * 200 and len(asked) == 1, asked
        with engine.begin() as conn:
            conn.execute(text("update studies set cancelled = true where id = 's'"))
        assert watch.cancelled(engine, "s") is False  # still inside its interval
        assert _CancelWatch(every=0).cancelled(engine, "s") is True
    finally:
        event.remove(engine, "before_cursor_execute", listener)


def test_the_threads_pool_refuses_the_grading_queue():
    done = subprocess.run([*EVALQ, "worker", "--pool", "threads", "--queues", "agents,grading"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--pool" in lines[0] and "grading" in lines[0], done.stderr


def _running_on(db_url: str, host: str) -> list[dict]:
    return [r for r in attempts_table(db_url)
            if r["state"] == "running" and (r["lease_owner"] or "").startswith(f"{host}:")]


def _outcome_events(db_url: str) -> list[tuple]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("select trial_id, attempt, outcome from attempt_events "
                                     "where outcome is not null")).all()
    finally:
        engine.dispose()


def test_sigkill_of_a_threads_worker_with_every_trial_in_flight_loses_nothing(
        tmp_path, fixture_copies, redis_url, postgres_url):
    settings = {"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_BROKER_URL": redis_url,
                "EVALQ_DATABASE_URL": postgres_url,
                "EVALQ_ARTIFACTS_URL": str(tmp_path / "shared-artifacts"),
                "EVALQ_LEASE_SECONDS": "3"}
    env = evalq_env(settings)
    study = write_big_study(tmp_path / "study", fixture_copies, "inflight",
                            condition("slow", '{ action = "solution", solution = "correct", '
                                      'seconds = 20 }'), TRIALS // 2)
    procs = Procs(tmp_path)
    try:
        procs.worker("grader", "host-g", "grading,results", env, concurrency=2)
        # --queues agents alone: the threads pool by default (evalq worker's auto)
        victim = procs.worker("agent-a", "host-a", "agents", env, concurrency=TRIALS + 10)
        launcher = procs.start("launcher", [*EVALQ, "run", str(study)], env)
        running = wait_for(lambda: len(_running_on(postgres_url, "host-a")) == TRIALS and
                           _running_on(postgres_url, "host-a"), 180,
                           f"host-a to run all {TRIALS} trials at once")
        # one process holds them all: the pid in every lease owner is the worker's own
        assert {r["lease_owner"].split(":")[1] for r in running} == {str(victim.pid)}
        assert f"concurrency: {TRIALS + 10} (thread)" in procs.log("agent-a")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(30)
        procs.worker("agent-b", "host-b", "agents", env, concurrency=TRIALS + 10)
        assert launcher.wait(300) == 0, procs.logs()
        final = status_json(env, "inflight")
        assert_adds_up(final)
        assert final["finished"] == TRIALS and final["by_outcome"].get("correct") == TRIALS, \
            final
    finally:
        procs.stop_all()

    rows = attempts_table(postgres_url)
    assert len(rows) == TRIALS and len({r["trial_id"] for r in rows}) == TRIALS
    assert all(r["state"] == "done" and r["outcome"] == "correct" for r in rows), rows
    # every trial was taken again after the kill, and finished on the new worker
    assert all(r["claims"] == 2 and r["worker_host"] == "host-b" for r in rows), rows
    events = _outcome_events(postgres_url)
    assert sorted(e[0] for e in events) == sorted(r["trial_id"] for r in rows), events
