"""Stranded gradings: reserved for exactly one re-send per expired lease, claimable at once, and
re-sent by the launcher's Sweeper to the real grading queue, named by the trial."""

from __future__ import annotations

import json
import time

import redis
from celery import Celery
from sqlalchemy import update

from evalq.config import load_settings
from evalq.ops.recovery import Sweeper
from evalq.queue.app import configure
from evalq.results.store import (RESENT, AttemptRow, StudyRow, claim_grading, create_attempts,
                                 init_db, mark_state, reserve_stranded_gradings, save_study)


def _study(engine, n: int) -> list[str]:
    ids = [f"g/f/c/r{i}" for i in range(n)]
    save_study(engine, StudyRow(id="g", manifest={}, lock={}, lock_digest="x"),
               [dict(id=t, study_id="g", fixture_id="f", fixture_digest="d", fixture_ref="r",
                     condition="c", repetition=i, block=i, order_index=i)
                for i, t in enumerate(ids)])
    create_attempts(engine, ids, {t: 1 for t in ids}, "g")
    for t in ids:  # agent done, artifacts stored, waiting for its grade
        mark_state(engine, t, 1, state="grading", artifacts={"workspace": "sha256:w"},
                   agent_finished_at=time.time(), lease_expires_at=None)
    return ids


def _expire(engine, trial_id: str) -> None:
    with engine.begin() as conn:
        conn.execute(update(AttemptRow).where(AttemptRow.trial_id == trial_id)
                     .values(lease_expires_at=time.time() - 1))


def test_reservation_is_one_resend_per_expiry(postgres_url):
    engine = init_db(postgres_url)
    dead, live, fresh = _study(engine, 3)
    assert claim_grading(engine, dead, 1, "grader:a", 30)[0]
    assert claim_grading(engine, live, 1, "grader:b", 30)[0]
    assert not claim_grading(engine, live, 1, "grader:c", 30)[0]  # a live lease is kept
    _expire(engine, dead)  # grader a died: its lease ran out

    assert reserve_stranded_gradings(engine, 30) == [(dead, 1)]
    assert reserve_stranded_gradings(engine, 30) == []  # a second sweeper finds it reserved
    assert sorted(reserve_stranded_gradings(engine, 30, unclaimed=True)) == [(fresh, 1)]
    ok, why = claim_grading(engine, dead, 1, "grader:c", 30)  # the re-sent message takes it
    assert ok, why
    assert not claim_grading(engine, dead, 1, "grader:d", 30)[0]


def test_launcher_sweeper_resends_a_dead_graders_trial(postgres_url, redis_url, monkeypatch):
    monkeypatch.setenv("EVALQ_BROKER_URL", redis_url)
    app = configure(Celery("sweep-test"), load_settings())
    engine = init_db(postgres_url)
    dead, waiting = _study(engine, 2)
    assert claim_grading(engine, dead, 1, "grader:a", 30)[0]
    _expire(engine, dead)
    sweeper = Sweeper(app, engine, "g", redis_url, every=0.0, grading_grace=3600,
                      resend_all=lambda: None, resend_expired=lambda items: None,
                      lease_seconds=30)
    sweeper()
    queued = [json.loads(m) for m in redis.Redis.from_url(redis_url).lrange("grading", 0, -1)]
    assert [m["headers"]["shadow"] for m in queued] == [f"grade_trial {dead}#1"]
    assert queued[0]["headers"]["argsrepr"] == f"{dead}#1"
    with engine.connect() as conn:
        owner = conn.execute(AttemptRow.__table__.select().where(
            AttemptRow.__table__.c.trial_id == dead)).mappings().one()["lease_owner"]
    assert owner == RESENT
    sweeper()  # reserved: not sent twice; the one still waiting is within its grace
    assert redis.Redis.from_url(redis_url).llen("grading") == 1


def test_worker_sweep_resends_unstarted_gradings_after_a_broker_restart(postgres_url):
    """No launcher: a grading worker's sweep sees the broker's run id change and re-sends the
    gradings no grader had taken (their messages died with the broker)."""
    import threading

    from evalq.ops.grading_sweep import start_worker_sweep

    engine = init_db(postgres_url)
    waiting, = _study(engine, 1)
    run_ids = iter(["before"] * 3 + ["after"] * 1000)
    sent: list[tuple[str, dict]] = []
    got_one = threading.Event()

    def send(name, payload):
        sent.append((name, payload))
        got_one.set()

    stop = threading.Event()
    thread = start_worker_sweep(lambda: engine, send, 2.0, lambda: next(run_ids), stop)
    try:
        assert got_one.wait(30), "no re-send after the broker restart"
    finally:
        stop.set()
        thread.join(10)
    assert [(n, p["trial_id"]) for n, p in sent] == [("evalq.grade_trial", waiting)]
