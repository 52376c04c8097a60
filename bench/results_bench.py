"""The results service's recording rate (issue 19): one `evalq worker --queues results` process
draining the real Celery results queue on Redis into PostgreSQL and into SQLite, against a
floor measured in the same run: the same rows written by one record_attempts call (one
INSERT ... ON CONFLICT statement) in this process, with no broker and no Celery.

The messages are published before the worker starts, so the figure is the worker's own rate:
from the moment its log says it is ready until every attempt of the study is recorded. The
start is taken as the last poll that did not yet see it ready (the rate is never flattered).
"""

from __future__ import annotations

import time
from pathlib import Path

from .figures import Figure
from .services import Workers, child_env, database, evalq_worker_argv, wait_for

TARGET = 2000.0  # attempts/s, one results process (issue 19)


def _seed(engine, study_id: str, attempts: int) -> list[dict]:
    """A planned study with one queued attempt per trial, and a grader's result for each."""
    from evalq.results.store import StudyRow, create_attempts, save_study

    trials = [dict(id=f"{study_id}/f{i % 100}/c{i % 2}/r{i}", study_id=study_id,
                   fixture_id=f"f{i % 100}", fixture_digest="sha256:x", fixture_ref="ref",
                   condition=f"c{i % 2}", repetition=i, block=i, order_index=i)
              for i in range(attempts)]
    save_study(engine, StudyRow(id=study_id, manifest={}, lock={},
                                lock_digest=f"sha256:{study_id}"), trials)
    create_attempts(engine, [t["id"] for t in trials], {t["id"]: 1 for t in trials}, study_id)
    now = time.time()
    return [{"study_id": study_id, "trial_id": t["id"], "attempt": 1, "fixture_id":
             t["fixture_id"], "condition": t["condition"], "repetition": t["repetition"],
             "fixture_ref": "ref", "fixture_digest": "sha256:x", "worker_host": "a@bench",
             "worker_env": {"python": "3.11", "agent": "scripted 1.0"},
             "started_at": now - 60, "agent_finished_at": now - 30,
             "metrics": {"input_tokens": None, "wall_seconds": 30.0},
             "artifacts": {"workspace": f"runs/{t['id']}/workspace.tar"},
             "outcome": "correct" if i % 3 else "incorrect", "reason": None,
             "criteria": [{"name": "hidden tests", "passed": bool(i % 3)}],
             "grade": {"grader_version": "1", "grader_host": "g@bench"},
             "tampered": False, "graded_at": now, "finished_at": now}
            for i, t in enumerate(trials)]


def _recorded(engine, study_id: str) -> int:
    from sqlalchemy import func, select

    from evalq.results.store import AttemptRow

    with engine.connect() as conn:
        return conn.execute(select(func.count()).where(AttemptRow.study_id == study_id,
                                                       AttemptRow.outcome.isnot(None))).scalar()


def floor_rate(engine, attempts: int) -> float:
    """The same rows written by one call, one transaction: what the database alone costs."""
    from evalq.results.store import record_attempts

    payloads = _seed(engine, "floor", attempts)
    started = time.perf_counter()
    written = record_attempts(engine, payloads)
    seconds = time.perf_counter() - started
    assert all(written) and _recorded(engine, "floor") == attempts
    return attempts / seconds


def service_rate(workdir: Path, broker: str, url: str, engine, attempts: int, log) -> float:
    """One results worker process draining `attempts` record_result messages."""
    from evalq.config import load_settings
    from evalq.queue.app import app, configure
    from evalq.queue.sending import send

    import redis

    redis.Redis.from_url(broker).flushdb()
    env = {"EVALQ_BROKER_URL": broker, "EVALQ_DATABASE_URL": url,
           "EVALQ_HOME": str(workdir / "home")}
    payloads = _seed(engine, "served", attempts)
    configure(app, load_settings().model_copy(update={"broker_url": broker,
                                                       "database_url": url}))
    started = time.perf_counter()
    for payload in payloads:
        send("evalq.record_result", payload)
    log(f"published {attempts} results in {time.perf_counter() - started:.1f} s")
    workdir.mkdir(parents=True, exist_ok=True)
    workers = Workers(workdir)
    workers.start(evalq_worker_argv("results", 1, f"results-bench-{time.monotonic_ns()}@%h"),
                  child_env(env), "results-worker")
    proc, worker_log = workers.procs[0]
    try:
        not_ready_at = time.perf_counter()

        def ready() -> bool:
            nonlocal not_ready_at
            if proc.poll() is not None:
                raise RuntimeError(f"the results worker exited; see {worker_log}")
            if b" ready." in worker_log.read_bytes():
                return True
            not_ready_at = time.perf_counter()
            return False

        wait_for(ready, 120, "the results worker to be ready", poll=0.02)
        wait_for(lambda: _recorded(engine, "served") >= attempts, 600,
                 f"{attempts} results recorded", poll=0.2)
        seconds = time.perf_counter() - not_ready_at
    finally:
        workers.stop()
    return attempts / seconds


def run(workdir: Path, broker: str, attempts: int, log) -> tuple[list[Figure], dict]:
    from evalq.results.store import get_engine, init_db

    figures: list[Figure] = []
    data: dict = {"attempts": attempts}
    for kind in ("postgres", "sqlite"):
        with database(workdir, kind) as (url, what):
            engine = init_db(url)
            floor = floor_rate(engine, attempts)
            rate = service_rate(workdir / kind, broker, url, engine, attempts, log)
            get_engine(url).dispose()
        log(f"{what}: service {rate:,.0f} attempts/s, floor {floor:,.0f} attempts/s")
        data[kind] = {"service_per_s": rate, "floor_per_s": floor}
        figures.append(Figure(
            f"results service, one process, Celery on Redis into {what}", rate, "attempts/s",
            target=TARGET, at_least=True,
            note=f"{rate / floor:.0%} of the floor ({floor:,.0f} attempts/s: the same "
                 f"{attempts:,} rows in one INSERT ... ON CONFLICT)"))
        figures.append(Figure(f"floor: the same rows in one statement ({what})", floor,
                              "attempts/s"))
    return figures, data
