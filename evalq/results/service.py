"""The results service: turns result messages into attempt rows, exactly once per key.

Results are written many to a transaction: a Celery worker's record_result tasks meet in one
group commit per process (results/batch.py), and the Redis results worker (results/drain.py)
writes each batch it takes off the queue at once. Either way one process records thousands of
results a second instead of one transaction per message (bench/results_bench.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Sequence

from evalq.config import load_settings
from evalq.results.batch import Failed, GroupCommit, write_each
from evalq.results.store import ready_engine, record_attempts

log = logging.getLogger("evalq.results.service")

#: most results one transaction writes
BATCH_LIMIT = 500
#: a result the database refused is retried after 1 s, doubling to 10 s, at most 60 times:
#: the record_result task's autoretry (queue/tasks.py) and the Redis results worker's
#: (results/drain.py) alike
RETRY_BACKOFF, RETRY_BACKOFF_MAX, MAX_RETRIES = 1, 10, 60


def record_message(payload: dict) -> str:
    """Record one result message (after the batch it joined committed); what happened to it."""
    return _committer(_database_url()).submit(payload)


def record_payloads(url: str, payloads: Sequence[dict]) -> list[str | Failed]:
    """Record a batch of result payloads in one transaction (each alone if that fails)."""
    return write_each(_writer(url), payloads)


def _described(payloads: Sequence[dict], written: Sequence[bool]) -> list[str]:
    """What happened to each payload, logged a line each but written at once (one write per
    batch, not per result: at thousands a second the log's writes add up)."""
    outcomes = ["recorded" if wrote else "already recorded" for wrote in written]
    if log.isEnabledFor(logging.INFO) and payloads:
        log.info("\n".join(f"{what} {p['trial_id']}#{p['attempt']}: {p.get('outcome')}"
                           for what, p in zip(outcomes, payloads, strict=True)))
    return outcomes


def _database_url() -> str:
    """The settings' database URL, read once per environment (not per message)."""
    key = (tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("EVALQ_"))),
           os.getcwd())
    with _lock:
        if key not in _urls:
            _urls[key] = load_settings().database_url
        return _urls[key]


_lock = threading.Lock()
_urls: dict[tuple, str] = {}
_writers: dict[str, Callable[[Sequence[dict]], list[str]]] = {}
_committers: dict[str, GroupCommit] = {}


def _writer(url: str) -> Callable[[Sequence[dict]], list[str]]:
    """The batch write for a database: its tables checked once per process, not per message."""
    with _lock:
        if url not in _writers:
            engine = ready_engine(url)

            def write(payloads: Sequence[dict]) -> list[str]:
                for payload in payloads:
                    payload.setdefault("finished_at", time.time())
                written = record_attempts(engine, payloads,
                                          [bool(p.get("regrade")) for p in payloads])
                return _described(payloads, written)

            _writers[url] = write
        return _writers[url]


def _committer(url: str) -> GroupCommit:
    """One group commit per database and process (locked: the first tasks arrive together)."""
    write = _writer(url)
    with _lock:
        if url not in _committers:
            _committers[url] = GroupCommit(write, BATCH_LIMIT)
        return _committers[url]
