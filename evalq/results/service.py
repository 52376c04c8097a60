"""The results service: turns result messages into attempt rows, exactly once per key.

A results worker runs record_result in many threads; their payloads meet in one group commit
per process (results/batch.py), so one process writes thousands of results a second with a
few statements per transaction instead of one transaction per message (bench/results_bench.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from functools import lru_cache
from typing import Sequence

from evalq.config import load_settings
from evalq.results.batch import GroupCommit
from evalq.results.store import init_db, record_attempts

log = logging.getLogger("evalq.results.service")

#: most results one transaction writes
BATCH_LIMIT = 500


def record_message(payload: dict) -> str:
    """Record one result message (after the batch it joined committed); what happened to it."""
    payload.setdefault("finished_at", time.time())
    written = _committer(_database_url()).submit(payload)
    what = "recorded" if written else "already recorded"
    log.info("%s %s#%s: %s", what, payload["trial_id"], payload["attempt"], payload["outcome"])
    return what


def _database_url() -> str:
    """The settings' database URL, read once per environment (not per message)."""
    return _url_for(tuple(sorted((k, v) for k, v in os.environ.items()
                                 if k.startswith("EVALQ_"))), os.getcwd())


@lru_cache(maxsize=8)
def _url_for(_environment: tuple, _cwd: str) -> str:
    return load_settings().database_url


_committers: dict[str, GroupCommit] = {}
_committers_lock = threading.Lock()


def _committer(url: str) -> GroupCommit:
    """One group commit per database and process (a lock: the first tasks arrive together)."""
    with _committers_lock:
        if url not in _committers:
            _committers[url] = _group_commit(url)
        return _committers[url]


def _group_commit(url: str) -> GroupCommit:
    engine = init_db(url)  # create_all once per process and database, not per message

    def write(payloads: Sequence[dict]) -> list[bool]:
        return record_attempts(engine, payloads,
                               [bool(p.get("regrade")) for p in payloads])

    return GroupCommit(write, BATCH_LIMIT)

