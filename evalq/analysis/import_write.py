"""Writing an imported study in one transaction, with the bulk writer, as its rows are validated.

Rows go in chunk by chunk (COPY on PostgreSQL, batched INSERTs on SQLite), so memory stays
bounded by a chunk, not by the file; the study row is written first (trials refer to it) and
completed last. Anything that goes wrong before `finish` rolls every row back: an import that
fails on its last row leaves the database as it was.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from sqlalchemy import update
from sqlalchemy.engine import Connection, Engine

from evalq.results.bulk import insert_missing
from evalq.results.store import AttemptRow, StudyRow, TrialRow

CHUNK = 10_000


class ImportTransaction:
    """`with ImportTransaction(engine, study_id, mode) as tx: tx.add(...); tx.finish(...)`."""

    def __init__(self, engine: Engine, study_id: str, mode: str):
        self.engine, self.study_id, self.mode = engine, study_id, mode
        self.trials: list[dict[str, Any]] = []
        self.attempts: list[dict[str, Any]] = []
        self.conn: Optional[Connection] = None
        self.finished = False

    def __enter__(self) -> "ImportTransaction":
        self.conn = self.engine.connect()
        self.trans = self.conn.begin()
        self.conn.execute(StudyRow.__table__.insert().values(
            id=self.study_id, manifest={}, manifest_path=None, lock={}, lock_digest="",
            mode=self.mode, created_at=time.time(), cancelled=False))
        return self

    def add(self, trial: dict[str, Any], attempt: dict[str, Any]) -> None:
        self.trials.append(trial)
        self.attempts.append(attempt)
        if len(self.trials) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        assert self.conn is not None
        insert_missing(self.conn, TrialRow.__table__, self.trials)
        insert_missing(self.conn, AttemptRow.__table__, self.attempts,
                       conflict=["trial_id", "attempt"])
        self.trials, self.attempts = [], []

    def finish(self, manifest: dict, lock: dict) -> None:
        """Write what is left, complete the study row and commit."""
        assert self.conn is not None
        self.flush()
        table = StudyRow.__table__
        self.conn.execute(update(table).where(table.c.id == self.study_id).values(
            manifest=manifest, lock=lock, lock_digest=lock["lock_digest"]))
        self.trans.commit()
        self.finished = True

    def __exit__(self, *exc_info) -> None:
        assert self.conn is not None
        try:
            if not self.finished:
                self.trans.rollback()
        finally:
            self.conn.close()
