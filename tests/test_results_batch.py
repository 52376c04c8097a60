"""Batched results (issue 19): many results per transaction, each as if written alone.

On SQLite and PostgreSQL: a batch writes what the same payloads written one at a time write;
a bad payload fails alone; through the real Redis results worker (results/drain.py) a
duplicated message writes nothing twice, a database error is retried as the Celery task's
autoretry does, and a worker SIGKILLed before its batch committed loses nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest
from sqlalchemy import select, text

from conftest import EVALQ, cli_env
from evalq.results.batch import Failed, GroupCommit
from evalq.results.service import record_payloads
from evalq.results.store import (AttemptRow, StudyRow, create_attempts, get_engine, init_db,
                                 mark_state, record_attempt, record_attempts, save_study)

FIELDS = ("trial_id", "attempt", "study_id", "state", "outcome", "reason", "worker_env",
          "regrades", "lease_expires_at", "metrics")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'r.db'}"
    return request.getfixturevalue("postgres_url")


def _seed(url: str, study: str, count: int) -> list[str]:
    engine = init_db(url)
    ids = [f"{study}/f/c/r{i}" for i in range(count)]
    save_study(engine, StudyRow(id=study, manifest={}, lock={}, lock_digest=f"sha256:{study}"),
               [dict(id=t, study_id=study, fixture_id="f", fixture_digest="d", fixture_ref="r",
                     condition="c", repetition=i, block=0, order_index=i)
                for i, t in enumerate(ids)])
    create_attempts(engine, ids, {t: 1 for t in ids}, study)
    return ids


def _rows(url: str, study: str) -> dict:
    table = AttemptRow.__table__
    with get_engine(url).connect() as conn:
        rows = conn.execute(select(*(table.c[f] for f in FIELDS))
                            .where(table.c.study_id == study)).mappings()
        return {(r["trial_id"], r["attempt"]): dict(r) for r in rows}


def _events(url: str, study: str) -> list[tuple]:
    with get_engine(url).connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "select trial_id, attempt, outcome from attempt_events where study_id = :s "
            "and outcome is not null order by id"), {"s": study})]


def _batch(study: str, ids: list[str]) -> tuple[list[dict], list[bool]]:
    def p(i, **fields):
        return dict(study_id=study, trial_id=ids[i], attempt=1, **fields)

    payloads = [p(0, outcome="correct", reason=None),
                p(0, outcome="incorrect", reason="a duplicate: must not win"),
                p(1, outcome="grading_failure", reason="engine down"),
                p(1, outcome="correct", reason=None),            # regrade within the batch
                p(2, outcome="correct", metrics={"tokens": None}),  # no worker_env: kept
                p(3, outcome="correct"),                          # recorded before: no-op
                p(4, outcome="correct")]                          # regrade of nothing: no-op
    return payloads, [False, False, False, True, False, False, True]


def test_a_batch_writes_what_one_at_a_time_writes(db_url):
    """Against the same payloads written one by one (each its own transaction, in order)."""
    written = {}
    for study, write in (("batch", "all"), ("single", "each")):
        ids = _seed(db_url, study, 5)
        engine = init_db(db_url)
        assert mark_state(engine, ids[2], 1, state="grading", worker_env={"python": "3.11"})
        assert record_attempt(engine, dict(study_id=study, trial_id=ids[3], attempt=1,
                                           outcome="incorrect"))
        payloads, regrades = _batch(study, ids)
        if write == "all":
            written[study] = record_attempts(engine, payloads, regrades)
        else:
            written[study] = [record_attempt(engine, p, regrade=r)
                              for p, r in zip(payloads, regrades)]
    assert written["batch"] == written["single"] == [True, False, True, True, True, False,
                                                     False]

    def relabelled(study):
        return {(k[0].split("/", 1)[1], k[1]): {f: v for f, v in row.items()
                                                if f not in ("trial_id", "study_id")}
                for k, row in _rows(db_url, study).items()}

    batch = relabelled("batch")
    assert batch == relabelled("single")
    assert batch[("f/c/r0", 1)]["outcome"] == "correct"
    assert (batch[("f/c/r1", 1)]["outcome"], batch[("f/c/r1", 1)]["regrades"]) == ("correct", 1)
    assert batch[("f/c/r2", 1)]["worker_env"] == {"python": "3.11"}
    assert batch[("f/c/r2", 1)]["metrics"] == {"tokens": None}
    assert batch[("f/c/r3", 1)]["outcome"] == "incorrect"
    assert batch[("f/c/r4", 1)]["outcome"] is None and batch[("f/c/r4", 1)]["state"] == "queued"
    assert all(r["state"] == "done" and r["lease_expires_at"] is None
               for k, r in batch.items() if k[0] != "f/c/r4")
    # one event per written row: r3 before the batch; r0 once, r1 twice (its result, then
    # the regrade, in that order), r2 once
    events = [(t.split("/", 1)[1], o) for t, _, o in _events(db_url, "batch")]
    assert events[0] == ("f/c/r3", "incorrect")
    assert sorted(events[1:]) == [("f/c/r0", "correct"), ("f/c/r1", "correct"),
                                  ("f/c/r1", "grading_failure"), ("f/c/r2", "correct")]
    assert [o for t, o in events if t == "f/c/r1"] == ["grading_failure", "correct"]


def test_one_bad_payload_fails_alone(db_url):
    ids = _seed(db_url, "bad", 6)
    good = [dict(study_id="bad", trial_id=t, attempt=1, outcome="correct") for t in ids]
    no_study = {"trial_id": ids[0], "attempt": 2, "outcome": "correct"}
    null_attempt = dict(study_id="bad", trial_id=ids[1], attempt=None, outcome="correct")
    outcomes = record_payloads(db_url, [*good[:3], no_study, null_attempt, *good[3:]])
    assert outcomes[:3] == outcomes[5:] == ["recorded"] * 3
    assert isinstance(outcomes[3], Failed) and isinstance(outcomes[3].error, KeyError)
    assert isinstance(outcomes[4], Failed) and "null" in str(outcomes[4].error).lower()
    rows = _rows(db_url, "bad")
    assert len(rows) == 6 and {r["outcome"] for r in rows.values()} == {"correct"}
    assert len(_events(db_url, "bad")) == 6
    # delivered again, the good ones change nothing
    assert record_payloads(db_url, good) == ["already recorded"] * 6
    assert len(_events(db_url, "bad")) == 6


def test_group_commit_writes_waiting_callers_together_and_answers_each():
    sizes: list[int] = []
    release = threading.Event()

    def write(items):
        sizes.append(len(items))
        if len(sizes) == 1:
            release.wait(30)  # the first batch is slow: the others gather behind it
        if "bad" in items:
            raise ValueError("bad item")
        return [item.upper() for item in items]

    commit = GroupCommit(write, limit=100)
    answers: dict[str, object] = {}

    def call(item):
        try:
            answers[item] = commit.submit(item)
        except ValueError as exc:
            answers[item] = exc

    first = threading.Thread(target=call, args=("first",))
    first.start()
    deadline = time.monotonic() + 30
    while not sizes and time.monotonic() < deadline:
        time.sleep(0.01)
    others = [threading.Thread(target=call, args=(item,))
              for item in [f"x{i}" for i in range(20)] + ["bad"]]
    for thread in others:
        thread.start()
    while len(commit._pending) < 21 and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    for thread in [first, *others]:
        thread.join(30)
    assert sizes[:2] == [1, 21], sizes  # the 21 waiting callers went in one write...
    assert len(sizes) == 2 + 21          # ...which failed, so each was written alone
    assert answers["first"] == "FIRST"
    assert all(answers[f"x{i}"] == f"X{i}" for i in range(20))
    assert isinstance(answers["bad"], ValueError)


# ---------------------------------------------------------------- the Redis results worker
def _worker(tmp_path, env: dict, name: str) -> subprocess.Popen:
    log = open(tmp_path / f"{name}.log", "ab")
    return subprocess.Popen([*EVALQ, "worker", "--queues", "results", "--hostname",
                             f"{name}@test", "--loglevel", "INFO"], env=cli_env(env),
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _publish(env: dict, payloads: list[dict]) -> None:
    from evalq.config import load_settings
    from evalq.queue.app import app, configure
    from evalq.queue.sending import send

    configure(app, load_settings().model_copy(update={"broker_url": env["EVALQ_BROKER_URL"]}))
    for payload in payloads:
        send("evalq.record_result", payload)


def _recorded(url: str, study: str) -> int:
    return sum(r["outcome"] is not None for r in _rows(url, study).values())


def test_redis_worker_records_each_result_once(tmp_path, db_url, redis_url):
    import redis

    ids = _seed(db_url, "drain", 40)
    env = {"EVALQ_BROKER_URL": redis_url, "EVALQ_DATABASE_URL": db_url,
           "EVALQ_HOME": str(tmp_path / "home")}
    results = [dict(study_id="drain", trial_id=t, attempt=1, outcome="correct", reason=None)
               for t in ids]
    late = "drain/f/c/late"  # a result for a trial not planned yet; PostgreSQL refuses it
    no_study = {"trial_id": ids[0], "attempt": 2, "outcome": "correct"}  # KeyError: fails
    regrade = dict(results[5], outcome="incorrect", regrade=True)
    _publish(env, results + results + [no_study, regrade]  # every result delivered twice
             + ([dict(results[0], trial_id=late)] if "postgresql" in db_url else []))
    worker = _worker(tmp_path, env, "results")
    try:
        _wait(lambda: _recorded(db_url, "drain") == 40, 120, "40 results recorded")
        if "postgresql" in db_url:  # retried with backoff (as the task's autoretry) until...
            _wait(lambda: "retry 2 in 2s" in (tmp_path / "results.log").read_text(), 60,
                  "the refused result to be retried twice")
            _seed_late(db_url, late)  # ...its trial exists: then it is recorded
            _wait(lambda: _recorded(db_url, "drain") == 41, 60, "the late result recorded")
        client = redis.Redis.from_url(redis_url)
        _wait(lambda: client.llen("results") == 0 and client.hlen("unacked") == 0, 30,
              "every message acknowledged")
    finally:
        _stop(worker)
    log = (tmp_path / "results.log").read_text()
    assert " ready." in log and "Connected to redis" in log
    rows = _rows(db_url, "drain")
    assert len(rows) == 40 + ("postgresql" in db_url)
    assert rows[(ids[5], 1)]["outcome"] == "incorrect" and rows[(ids[5], 1)]["regrades"] == 1
    assert all(r["regrades"] == 0 and r["outcome"] == "correct"
               for k, r in rows.items() if k[0] != ids[5])
    events = _events(db_url, "drain")
    assert sorted(events) == sorted([(t, 1, "correct") for t in ids]
                                    + [(ids[5], 1, "incorrect")]
                                    + ([(late, 1, "correct")] if "postgresql" in db_url else []))
    assert "not recorded: KeyError: 'study_id'" in log
    assert log.count("already recorded") == 40


def _seed_late(url: str, trial_id: str) -> None:
    from evalq.results.store import TrialRow

    engine = init_db(url)
    save_study(engine, StudyRow(id="drain", manifest={}, lock={}, lock_digest="sha256:drain"),
               [TrialRow(id=trial_id, study_id="drain", fixture_id="f", fixture_digest="d",
                         fixture_ref="r", condition="c", repetition=99, block=0,
                         order_index=99)])


def test_worker_killed_before_its_commit_loses_nothing(tmp_path, postgres_url, redis_url):
    """SIGKILL while the batch waits on a table lock: nothing written, nothing acknowledged;
    the next worker restores the messages after the visibility timeout and records each once."""
    import psycopg2
    import redis

    ids = _seed(postgres_url, "kill", 10)
    env = {"EVALQ_BROKER_URL": redis_url, "EVALQ_DATABASE_URL": postgres_url,
           "EVALQ_HOME": str(tmp_path / "home"), "EVALQ_VISIBILITY_TIMEOUT": "3"}
    client = redis.Redis.from_url(redis_url)
    dbname = postgres_url.rsplit("/", 1)[1]
    locker = psycopg2.connect(host="127.0.0.1", user="postgres", dbname=dbname)
    locker.cursor().execute("LOCK TABLE attempts IN ACCESS EXCLUSIVE MODE")
    _publish(env, [dict(study_id="kill", trial_id=t, attempt=1, outcome="correct") for t in ids])
    first = _worker(tmp_path, env, "first")
    try:
        _wait(lambda: client.hlen("unacked") == 10, 60, "the worker to take all 10 messages")
        watcher = psycopg2.connect(host="127.0.0.1", user="postgres", dbname=dbname)
        watcher.autocommit = True

        def blocked():
            cur = watcher.cursor()
            cur.execute("select count(*) from pg_stat_activity where datname = %s and "
                        "wait_event_type = 'Lock' and query ilike 'insert into attempts%%'",
                        (dbname,))
            return cur.fetchone()[0] > 0

        _wait(blocked, 60, "the batch's INSERT to wait on the lock")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        watcher.close()
    finally:
        _stop(first)
        locker.rollback()
        locker.close()
    assert _recorded(postgres_url, "kill") == 0
    assert client.hlen("unacked") == 10  # still owed: nobody acknowledged them
    second = _worker(tmp_path, env, "second")
    try:
        _wait(lambda: _recorded(postgres_url, "kill") == 10, 120, "the 10 results re-delivered")
        _wait(lambda: client.hlen("unacked") == 0 and client.llen("results") == 0, 30,
              "every message acknowledged")
    finally:
        _stop(second)
    assert sorted(_events(postgres_url, "kill")) == sorted((t, 1, "correct") for t in ids)


def test_celery_event_receivers_see_each_recorded_task(tmp_path, postgres_url, redis_url):
    """Flower reads Celery's task events: the batched worker's task.multi messages decode into
    one task-received and one task-succeeded per message, named by the trial."""
    import redis

    from evalq.config import load_settings
    from evalq.queue.app import app, configure

    ids = _seed(postgres_url, "ev", 5)
    env = {"EVALQ_BROKER_URL": redis_url, "EVALQ_DATABASE_URL": postgres_url,
           "EVALQ_HOME": str(tmp_path / "home")}
    configure(app, load_settings().model_copy(update={"broker_url": redis_url}))
    seen: dict[str, list] = {"task-received": [], "task-succeeded": [], "worker-online": []}
    with app.connection_for_read() as conn:
        receiver = app.events.Receiver(conn, handlers={
            kind: (lambda event, kind=kind: seen[kind].append(event)) for kind in seen})
        listening = threading.Thread(target=lambda: receiver.capture(limit=None, wakeup=False),
                                     daemon=True)
        listening.start()
        client = redis.Redis.from_url(redis_url)
        _wait(lambda: client.execute_command("PUBSUB", "NUMPAT") > 0, 30,
              "the event receiver to subscribe")
        _publish(env, [dict(study_id="ev", trial_id=t, attempt=1, outcome="correct")
                       for t in ids])
        worker = _worker(tmp_path, env, "events")
        try:
            _wait(lambda: len(seen["task-succeeded"]) >= 5, 60, "5 task-succeeded events")
        finally:
            _stop(worker)
            receiver.should_stop = True
            listening.join(10)
    assert sorted(e["name"] for e in seen["task-received"]) == sorted(
        f"record_result {t}#1" for t in ids)
    assert {e["uuid"] for e in seen["task-succeeded"]} == {e["uuid"] for e in
                                                            seen["task-received"]}
    assert {e["result"] for e in seen["task-succeeded"]} == {"'recorded'"}
    assert [e["hostname"] for e in seen["worker-online"]] == ["events@test"]
