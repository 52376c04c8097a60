"""A results database made by an earlier evalq is brought up to date by init_db, data kept."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlmodel import Session, SQLModel, select

from evalq.results.store import (AttemptEvent, AttemptRow, StudyRow, TrialRow, create_attempts,
                                 get_engine, init_db, record_attempt, save_study)


FIRST_CHECK_COLUMNS = ("session_checks", "first_check_result", "first_check_reason",
                       "first_check_grade", "eventual_result")


def _old_database(url: str) -> None:
    """Today's tables minus what came later: attempts.updated_at (and its index),
    attempts.regrades (NOT NULL with a default), the first visible check's columns, the
    attempt_events and grader_checks tables."""
    engine = get_engine(url)
    SQLModel.metadata.create_all(engine)
    study = StudyRow(id="s", manifest={"conditions": []}, lock={}, lock_digest="sha256:x")
    trial = TrialRow(id="s/f/c/r1", study_id="s", fixture_id="f", fixture_digest="d",
                     fixture_ref="r", condition="c", repetition=1, block=0, order_index=0)
    save_study(engine, study, [trial])
    create_attempts(engine, [trial.id], {trial.id: 1}, "s")
    with engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_attempt_study_updated"))
        conn.execute(text("ALTER TABLE attempts DROP COLUMN updated_at"))
        conn.execute(text("ALTER TABLE attempts DROP COLUMN regrades"))
        for column in FIRST_CHECK_COLUMNS:
            conn.execute(text(f"ALTER TABLE attempts DROP COLUMN {column}"))
        conn.execute(text("DROP TABLE attempt_events"))
        conn.execute(text("DROP TABLE grader_checks"))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def old_url(request, tmp_path):
    url = (f"sqlite:///{tmp_path / 'old.db'}" if request.param == "sqlite"
           else request.getfixturevalue("postgres_url"))
    _old_database(url)
    return url


def test_an_old_database_gains_the_new_columns_and_keeps_its_rows(old_url):
    columns = {c["name"] for c in inspect(get_engine(old_url)).get_columns("attempts")}
    assert "updated_at" not in columns and "regrades" not in columns
    engine = init_db(old_url)
    inspector = inspect(engine)
    columns = {c["name"] for c in inspector.get_columns("attempts")}
    assert {"updated_at", "regrades", *FIRST_CHECK_COLUMNS} <= columns
    assert "ix_attempt_study_updated" in {i["name"] for i in inspector.get_indexes("attempts")}
    assert {"attempt_events", "grader_checks"} <= set(inspector.get_table_names())
    # the row written before the upgrade is still there, with the default for the new column
    with Session(engine) as session:
        (row,) = session.exec(select(AttemptRow)).all()
    assert (row.trial_id, row.regrades, row.outcome) == ("s/f/c/r1", 0, None)
    # and the writes that need the new columns now work
    assert record_attempt(engine, {"study_id": "s", "trial_id": "s/f/c/r1", "attempt": 1,
                                   "outcome": "correct", "reason": None,
                                   "session_checks": {"first_check_at": 1.0, "check_runs": 2},
                                   "first_check_result": "incorrect",
                                   "first_check_reason": "1 hidden check failed"})
    with Session(engine) as session:
        (row,) = session.exec(select(AttemptRow)).all()
        events = session.exec(select(AttemptEvent)).all()
    assert row.outcome == "correct" and row.updated_at is not None
    # the session's first attempt and its eventual result, kept apart
    assert (row.first_check_result, row.eventual_result) == ("incorrect", "correct")
    assert row.session_checks["check_runs"] == 2
    assert [e.outcome for e in events] == ["correct"]


def test_a_current_database_is_left_as_it_is(tmp_path):
    from evalq.results.schema import add_missing

    engine = init_db(f"sqlite:///{tmp_path / 'new.db'}")
    assert add_missing(engine, SQLModel.metadata) == []
