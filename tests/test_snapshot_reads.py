"""Counts made of several queries read one committed state (results.store.snapshot)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from evalq.results.store import (AttemptRow, StudyRow, TrialRow, create_attempts, init_db,
                                 record_attempt, save_study, snapshot)
from evalq.results.tallies import study_tallies


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    url = (f"sqlite:///{tmp_path / 'r.db'}" if request.param == "sqlite"
           else request.getfixturevalue("postgres_url"))
    engine = init_db(url)
    trials = [TrialRow(id=f"s/f/c/r{i}", study_id="s", fixture_id="f", fixture_digest="d",
                       fixture_ref="r", condition="c", repetition=i, block=0, order_index=i)
              for i in range(3)]
    save_study(engine, StudyRow(id="s", manifest={}, lock={}, lock_digest="sha256:x"), trials)
    create_attempts(engine, [t.id for t in trials], {t.id: 1 for t in trials}, "s")
    return engine


def _finished(conn) -> int:
    c = AttemptRow.__table__.c
    return conn.execute(select(func.count()).where(c.outcome.isnot(None))).scalar()


def test_a_write_committed_between_two_reads_is_not_seen_by_the_second(engine):
    with snapshot(engine) as conn:
        before = _finished(conn)
        assert record_attempt(engine, {"study_id": "s", "trial_id": "s/f/c/r0", "attempt": 1,
                                       "outcome": "correct", "reason": None})
        assert _finished(conn) == before == 0
    with snapshot(engine) as conn:
        assert _finished(conn) == 1


def test_tallies_add_up_and_leave_no_transaction_open(engine):
    record_attempt(engine, {"study_id": "s", "trial_id": "s/f/c/r1", "attempt": 1,
                            "outcome": "incorrect", "reason": None})
    t = study_tallies(engine, "s", now=0.0)
    assert t["planned"] == 3
    assert sum(t["states"].values()) + sum(t["outcomes"].values()) == 3
    # the snapshot ended: a write after it is seen by the next tally
    record_attempt(engine, {"study_id": "s", "trial_id": "s/f/c/r2", "attempt": 1,
                            "outcome": "correct", "reason": None})
    assert sum(study_tallies(engine, "s", now=0.0)["outcomes"].values()) == 2
