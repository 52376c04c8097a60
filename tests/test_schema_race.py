"""Processes that start together on a new PostgreSQL database (a launcher and its workers)
each create evalq's tables; all of them must come up, none fail in the race."""

from __future__ import annotations

import multiprocessing

from evalq.results.store import AttemptRow


def _create(url: str, barrier, results) -> None:
    from evalq.results.store import init_db

    barrier.wait(30)  # all at once, as a launcher and its workers start
    try:
        init_db(url)
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - reported to the test
        results.put(f"{type(exc).__name__}: {exc}")


def test_processes_starting_together_on_a_new_database_all_come_up(postgres_url):
    context = multiprocessing.get_context("spawn")
    count = 8
    barrier, results = context.Barrier(count), context.Queue()
    procs = [context.Process(target=_create, args=(postgres_url, barrier, results))
             for _ in range(count)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    outcomes = [results.get(timeout=5) for _ in procs]
    assert outcomes == ["ok"] * count, outcomes
    from sqlalchemy import inspect

    from evalq.results.store import get_engine

    assert AttemptRow.__tablename__ in inspect(get_engine(postgres_url)).get_table_names()
